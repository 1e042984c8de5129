#!/usr/bin/env python3
"""Real TorchScript exports of Hugging Face decoders, made the way users make them.

  python tools/tsexport/export.py OUT_DIR [ARCH ...]

Each architecture gets a small random configuration (fixed seed; hidden 64, 4 heads, vocab 512) and is
exported with `torch.onnx.export(..., dynamo=False)` at opset 17 with dynamic `batch` and `sequence`
axes on `input_ids`/`attention_mask` and a `logits` output, with the model's default attention
implementation. Needs torch and transformers (pinned in tools/tsexport/requirements.txt); the models
are measurement data for OL301, the placement differential and the speed bench, not fixtures.
`ARCH:LAYERS` overrides the layer count (e.g. `llama:64` for a several-thousand-node decoder).
"""
import os
import sys
import warnings

import torch
import transformers as tf

warnings.filterwarnings("ignore")

COMMON = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, intermediate_size=128,
              max_position_embeddings=256)

ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(num_key_value_heads=2)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=2, sliding_window=None)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_key_value_heads=2)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict()),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(num_key_value_heads=4, pad_token_id=0)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(num_key_value_heads=1, head_dim=16)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_head=4, n_positions=256)),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(n_embd=64, n_head=4, n_positions=256, rotary_dim=8)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict()),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_head=4)),
    "falcon": ("FalconConfig", "FalconForCausalLM", dict(new_decoder_architecture=False)),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=128, word_embed_proj_dim=64)),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM", dict(n_embd=64, n_head=4, n_positions=256, rotary_dim=8)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(num_key_value_heads=4)),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", dict(num_key_value_heads=4)),
    # A second set, held out from tuning (measured only).
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(n_embd=64, n_head=4, n_positions=256)),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(num_key_value_heads=2)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", dict(num_key_value_heads=2)),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(num_key_value_heads=2)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(num_key_value_heads=2, head_dim=16)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(num_key_value_heads=2, head_dim=16)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(num_key_value_heads=4)),
    "mpt": ("MptConfig", "MptForCausalLM", dict(d_model=64, n_heads=4, expansion_ratio=2)),
    "xglm": ("XGLMConfig", "XGLMForCausalLM", dict(d_model=64, attention_heads=4, ffn_dim=128)),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", dict()),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM", dict()),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", dict(num_key_value_heads=2)),
    "glm": ("GlmConfig", "GlmForCausalLM", dict(num_key_value_heads=2, head_dim=16, pad_token_id=0)),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "helium": ("HeliumConfig", "HeliumForCausalLM", dict(num_key_value_heads=2, head_dim=16)),
}
HELD_OUT = ["gpt_bigcode", "starcoder2", "granite", "cohere", "qwen3", "gemma2", "olmo2", "mpt", "xglm",
            "biogpt", "persimmon", "nemotron", "glm", "smollm3", "helium"]


class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def export(out, arch, layers):
    cfg_name, model_name, extra = ARCHS[arch]
    kw = dict(COMMON)
    kw.update(extra)
    kw.update(num_hidden_layers=layers, n_layer=layers)
    torch.manual_seed(0)
    cfg = getattr(tf, cfg_name)(**kw)
    model = getattr(tf, model_name)(cfg).eval()
    ids = torch.randint(0, 512, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    path = os.path.join(out, f"{arch}.L{layers}.ts.op17.onnx")
    with torch.no_grad():
        torch.onnx.export(Wrap(model), (ids, mask), path, dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "logits": {0: "batch", 1: "sequence"}})
    return path


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for spec in sys.argv[2:] or [f"{a}:2" for a in ARCHS if a not in HELD_OUT]:
        arch, _, n = spec.partition(":")
        try:
            p = export(out, arch, int(n or 2))
            print("ok", p, flush=True)
        except Exception as e:  # report and go on: one architecture failing is data too
            print("FAILED", arch, type(e).__name__, str(e).splitlines()[0][:200], flush=True)


if __name__ == "__main__":
    main()
