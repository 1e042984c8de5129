#!/usr/bin/env python3
"""The fifth unseen corpus (tests/fixtures/realworld/unseen5/, issue 16): kinds of models no earlier
set had, made the way users make them with public tools, measured before any code was changed for
them. Same rules as unseen3.py (tiny configs, seeded, floating-point tensors of 256 or more elements
zeroed). Everything is built offline from configs: tiny random Hugging Face checkpoints are written
with `save_pretrained` into the scratch folder and exported from there.

  # venv: tools/realworld/unseen5-requirements.txt
  python tools/realworld/unseen5.py export tests/fixtures/realworld/unseen5 target/unseen5
  python tools/realworld/unseen5.py derive tests/fixtures/realworld/unseen5 target/unseen5
  # truth: SET=unseen5 tools/realworld/record.sh 1.23.2 1.24.4 1.31.1, then cpu_truth.py
  # (a rerun keeps the files it finds: delete them to make them again)

File names say how a model was made:
  optimum.*   optimum-onnx `main_export` (TorchScript exporter inside): decoder-only models with
              past KV (`text-generation-with-past`, one model.onnx), encoder-decoders whose decoder
              is the merged one (`decoder_model_merged.onnx`: an `If` on `use_cache_branch`)
  optO<k>.*   optimum's ORTOptimizer with AutoOptimizationConfig O1..O4 (O4: fp16, for GPU)
  optq.*      optimum's ORTQuantizer (AutoQuantizationConfig.avx512_vnni, dynamic)
  genai.*     onnxruntime-genai's model builder (`python -m onnxruntime_genai.models.builder`):
              GroupQueryAttention, RotaryEmbedding, SkipSimplifiedLayerNormalization, MatMulNBits
              (int4), for `-e cuda` and `-e cpu`
  yolo.*      ultralytics YOLO built from its yaml (random init, width scaled down, 3 classes)
              and `.export(format='onnx')`: v8 detect, 11 classify, 26 detect, segment and pose
              (end-to-end: TopK/GatherElements instead of NMS), dynamic/static, simplify on/off
  dyn.*       torch.onnx.export(dynamo=True, optimize=True) of a torchvision EfficientNet
  ext.*       a model saved with external data (`save_as_external_data`, one .data file)
  xgb.* / cb.*  xgboost through onnxmltools; catboost's own ONNX export
  ortopt.*    ORT's transformer optimizer, model_type gpt2 on optimum's GPT-2 with past
              (use_gpu=True, opt_level=0)
  qdq*.*      onnxruntime.quantization: per-tensor QDQ with ForceQuantizeNoInputCheck and
              WeightSymmetric=False (uint8 weights), MatMulConstBOnly, and 4-bit MatMul QDQ
              (matmul_4bits_quantizer with quant_format=QDQ)
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unseen3 import _save  # noqa: E402
from unseen4 import Reader  # noqa: E402


# Metadata that changes on every run (ultralytics' export date, catboost's training time and
# model GUID): dropped so that a rerun writes the same bytes.
VOLATILE_METADATA = {"date", "train_finish_time", "model_guid"}


def _stabilize(out):
    """Drops VOLATILE_METADATA from every model in `out` (external data is left where it is)."""
    import glob

    import onnx

    for path in sorted(glob.glob(os.path.join(out, "*.onnx"))):
        m = onnx.load(path, load_external_data=False)
        keep = [p for p in m.metadata_props if p.key not in VOLATILE_METADATA]
        if len(keep) != len(m.metadata_props):
            del m.metadata_props[:]
            m.metadata_props.extend(keep)
            onnx.save_model(m, path)


def _tiny_checkpoints(scratch):
    """Tiny random Hugging Face checkpoints, written with save_pretrained (no hub access)."""
    import torch
    import transformers as tf

    cks = {
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                                                       num_hidden_layers=2, num_attention_heads=4,
                                                       num_key_value_heads=2, max_position_embeddings=128)),
        "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config(vocab_size=256, hidden_size=32, intermediate_size=64,
                                                       num_hidden_layers=2, num_attention_heads=4,
                                                       num_key_value_heads=2, max_position_embeddings=128)),
        "phi3": (tf.Phi3ForCausalLM, tf.Phi3Config(vocab_size=256, hidden_size=32, intermediate_size=64,
                                                    num_hidden_layers=2, num_attention_heads=4,
                                                    num_key_value_heads=4, max_position_embeddings=128,
                                                    original_max_position_embeddings=128, pad_token_id=0)),
        "gpt2": (tf.GPT2LMHeadModel, tf.GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=128)),
        "t5": (tf.T5ForConditionalGeneration, tf.T5Config(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                          num_heads=4, decoder_start_token_id=0, pad_token_id=0)),
        "whisper": (tf.WhisperForConditionalGeneration,
                    tf.WhisperConfig(vocab_size=256, d_model=32, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=1500,
                                     max_target_positions=64, decoder_start_token_id=1, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2, begin_suppress_tokens=None,
                                     suppress_tokens=None)),
        "bert": (tf.BertForSequenceClassification, tf.BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                                                                   num_attention_heads=4, intermediate_size=64,
                                                                   max_position_embeddings=64)),
    }
    from tokenizers import Tokenizer, models

    paths = {}
    for name, (cls, cfg) in cks.items():
        d = os.path.join(scratch, "hf", name)
        paths[name] = d
        if not os.path.exists(os.path.join(d, "config.json")):
            torch.manual_seed(0)
            cls(cfg).eval().save_pretrained(d)
        if not os.path.exists(os.path.join(d, "tokenizer.json")):
            # a word-level tokenizer over the tiny vocabulary (the genai builder saves one)
            tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(256)}, unk_token="t0"))
            tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", pad_token="t0", bos_token="t1",
                                       eos_token="t2").save_pretrained(d)
    return paths


def export(out, scratch):
    import onnx

    os.makedirs(out, exist_ok=True)
    os.makedirs(scratch, exist_ok=True)
    hf = _tiny_checkpoints(scratch)

    def dst(name):
        return os.path.join(out, name + ".onnx")

    def keep(name, path, base=True):
        """The exported model to the fixtures (zeroed) and, as made, to the scratch folder for `derive`."""
        m = onnx.load(path, load_external_data=True)
        if base:
            onnx.save_model(m, os.path.join(scratch, name + ".onnx"), save_as_external_data=False)
        _save(m, dst(name))

    def attempt(name, fn):
        if os.path.exists(dst(name)):
            return
        try:
            fn()
        except Exception as e:  # an export that fails is reported and skipped
            print("skip", name, type(e).__name__, str(e)[:300], flush=True)

    # -- optimum-onnx main_export
    from optimum.exporters.onnx import main_export

    def optimum(name, ck, task, files, **kw):
        def f():
            d = os.path.join(scratch, "optimum", name)
            if not os.path.exists(os.path.join(d, files[0][0])):
                main_export(hf[ck], d, task=task, local_files_only=True, do_validation=False, **kw)
            for fname, suffix in files:
                keep(f"optimum.{name}{suffix}", os.path.join(d, fname))
        attempt(f"optimum.{name}{files[0][1]}", f)

    optimum("llama", "llama", "text-generation-with-past", [("model.onnx", "")])
    optimum("qwen2", "qwen2", "text-generation-with-past", [("model.onnx", "")])
    optimum("gpt2", "gpt2", "text-generation-with-past", [("model.onnx", "")])
    optimum("phi3", "phi3", "text-generation-with-past", [("model.onnx", "")], opset=18)
    optimum("t5", "t5", "text2text-generation-with-past",
            [("decoder_model_merged.onnx", ".decoder-merged")])
    optimum("whisper", "whisper", "automatic-speech-recognition-with-past",
            [("decoder_model_merged.onnx", ".decoder-merged")])
    optimum("bert", "bert", "text-classification", [("model.onnx", "")])

    # -- onnxruntime-genai model builder, run by the genai venv's Python (it needs transformers 5;
    #    optimum-onnx needs transformers < 4.58): GENAI_PYTHON, default this one
    genai_python = os.environ.get("GENAI_PYTHON", sys.executable)

    def genai(name, ck, precision, ep):
        def f():
            d = os.path.join(scratch, "genai", name)
            cache = os.path.join(scratch, "genai", name + ".cache")
            if not os.path.exists(os.path.join(d, "model.onnx")):
                r = subprocess.run([genai_python, "-m", "onnxruntime_genai.models.builder", "-i", hf[ck], "-o", d,
                                    "-p", precision, "-e", ep, "-c", cache], capture_output=True, text=True)
                print(r.stdout[-2000:], r.stderr[-2000:], flush=True)
            keep(f"genai.{name}", os.path.join(d, "model.onnx"))
        attempt(f"genai.{name}", f)

    genai("llama.int4-cuda", "llama", "int4", "cuda")
    genai("qwen2.fp16-cuda", "qwen2", "fp16", "cuda")
    genai("phi3.int4-cpu", "phi3", "int4", "cpu")
    genai("llama.fp32-cpu", "llama", "fp32", "cpu")
    genai("qwen2.fp32-cuda", "qwen2", "fp32", "cuda")

    # -- ultralytics YOLO from yaml (random init), width scaled down, 3 classes
    import yaml

    def yolo(name, cfg, fname, **kw):
        def f():
            import ultralytics
            from ultralytics import YOLO

            src = os.path.join(os.path.dirname(ultralytics.__file__), "cfg", "models", cfg)
            d = os.path.join(scratch, "yolo", name)
            os.makedirs(d, exist_ok=True)
            c = yaml.safe_load(open(src))
            c["nc"] = 3
            if "kpt_shape" in c:
                c["kpt_shape"] = [5, 3]
            c["scales"] = {"n": [0.33, 0.0625, 256]}
            path = os.path.abspath(os.path.join(d, fname))
            with open(path, "w") as fh:
                yaml.safe_dump(c, fh)
            import torch

            torch.manual_seed(0)
            here = os.getcwd()
            os.chdir(d)  # the export is written to the working directory
            try:
                onnx_path = os.path.abspath(YOLO(path).export(format="onnx", **kw))
            finally:
                os.chdir(here)
            keep(f"yolo.{name}", onnx_path)
        attempt(f"yolo.{name}", f)

    yolo("v8-det", "v8/yolov8.yaml", "yolov8n.yaml", imgsz=128, dynamic=False, simplify=True, opset=17)
    yolo("26-seg", "26/yolo26-seg.yaml", "yolo26n-seg.yaml", imgsz=128, dynamic=True, simplify=True)
    yolo("11-cls", "11/yolo11-cls.yaml", "yolo11n-cls.yaml", imgsz=64, dynamic=True, simplify=True)
    yolo("26-det.dyn", "26/yolo26.yaml", "yolo26n.yaml", imgsz=128, dynamic=True, simplify=False)
    yolo("26-pose", "26/yolo26-pose.yaml", "yolo26n-pose.yaml", imgsz=128, dynamic=False, simplify=True,
         opset=13)

    # -- torch.onnx.export(dynamo=True, optimize=True) of a small torchvision EfficientNet
    def effnet():
        import torch
        from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf

        torch.manual_seed(0)
        setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.125, depth_mult=0.34)
        m = EfficientNet(setting, 0.2, last_channel=last, num_classes=10).eval()
        tmp = os.path.join(scratch, "dyn.efficientnet.tmp.onnx")
        x = torch.rand(1, 3, 64, 64)
        torch.onnx.export(m, (x,), tmp, dynamo=True, optimize=True, input_names=["input"], output_names=["logits"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
        keep("dyn.efficientnet", tmp)

    attempt("dyn.efficientnet", effnet)

    # -- tabular: xgboost through onnxmltools, catboost's own export
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.random((64, 6), dtype=np.float32)
    y = (X[:, 0] * 3).astype(np.int64)

    def xgb():
        import xgboost
        from onnxmltools import convert_xgboost
        from onnxmltools.convert.common.data_types import FloatTensorType

        c = xgboost.XGBClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
        m = convert_xgboost(c, name="xgb.classifier", initial_types=[("input", FloatTensorType([None, 6]))],
                            target_opset=15)
        onnx.save_model(m, dst("xgb.classifier"))

    attempt("xgb.classifier", xgb)

    def cb():
        import catboost

        c = catboost.CatBoostClassifier(iterations=4, depth=3, random_seed=0, verbose=False,
                                        train_dir=os.path.join(scratch, "catboost"), thread_count=1).fit(X, y)
        c.save_model(dst("cb.classifier"), format="onnx")

    attempt("cb.classifier", cb)
    _stabilize(out)


def derive(out, scratch):
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    def src(name):
        return os.path.join(scratch, name + ".onnx")

    def dst(name):
        return os.path.join(out, name + ".onnx")

    def run(name, fn):
        if os.path.exists(dst(name)):
            return
        tmp = os.path.join(scratch, "derived", name + ".onnx")
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        try:
            fn(tmp)
        except Exception as e:
            print("skip", name, type(e).__name__, str(e)[:300], flush=True)
            return
        _save(onnx.load(tmp, load_external_data=True), dst(name))

    # -- optimum ORTOptimizer O1..O4 and ORTQuantizer on the optimum exports
    def ortoptimizer(base, level):
        def f(t):
            from optimum.onnxruntime import AutoOptimizationConfig, ORTOptimizer

            d = os.path.join(scratch, "optimum", base)
            o = ORTOptimizer.from_pretrained(d, file_names=["model.onnx"])
            cfg = getattr(AutoOptimizationConfig, level)()
            od = os.path.join(scratch, "optimum", f"{base}-{level}")
            o.optimize(save_dir=od, optimization_config=cfg)
            shutil.copy(os.path.join(od, "model_optimized.onnx"), t)
        return f

    for level in ["O1", "O2", "O3", "O4"]:
        run(f"opt{level}.bert", ortoptimizer("bert", level))
    run("optO3.gpt2", ortoptimizer("gpt2", "O3"))
    run("optO4.gpt2", ortoptimizer("gpt2", "O4"))

    def ortquantizer(base):
        def f(t):
            from optimum.onnxruntime import ORTQuantizer
            from optimum.onnxruntime.configuration import AutoQuantizationConfig

            d = os.path.join(scratch, "optimum", base)
            q = ORTQuantizer.from_pretrained(d, file_name="model.onnx")
            od = os.path.join(scratch, "optimum", f"{base}-q")
            q.quantize(save_dir=od, quantization_config=AutoQuantizationConfig.avx512_vnni(is_static=False,
                                                                                          per_channel=True))
            shutil.copy(os.path.join(od, "model_quantized.onnx"), t)
        return f

    run("optq.bert", ortquantizer("bert"))
    run("optq.qwen2", ortquantizer("qwen2"))

    # -- ORT's transformer optimizer, gpt2 with past
    from onnxruntime.transformers import optimizer

    def ortopt(path, model_type, heads, hidden):
        def f(t):
            o = optimizer.optimize_model(path, model_type=model_type, num_heads=heads, hidden_size=hidden,
                                         use_gpu=True, opt_level=0)
            o.save_model_to_file(t)
        return f

    gpt2 = os.path.join(scratch, "optimum", "gpt2", "model.onnx")
    run("ortopt.optimum.gpt2", ortopt(gpt2, "gpt2", 4, 32))
    # (its fp16 form, convert_float_to_float16(keep_io_types=True), is byte for byte optO4.gpt2)

    # -- onnxruntime.quantization options no set used
    def image_reader(name, shape=(1, 3, 128, 128)):
        import numpy as np

        r = Reader(src(name))  # symbolic image dims: a 128x128 image
        rng = np.random.default_rng(0)
        for b in r.batches:
            b["images"] = rng.random(shape, dtype=np.float32)
        return r

    run("qdqpt.yolo.26-det.dyn", lambda t: quantize_static(
        src("yolo.26-det.dyn"), t, image_reader("yolo.26-det.dyn"), quant_format=QuantFormat.QDQ, per_channel=False,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8,
        extra_options={"ForceQuantizeNoInputCheck": True, "WeightSymmetric": False}))
    def bert_reader():
        r = Reader(src("optimum.bert"))  # token type ids must be 0 or 1
        for b in r.batches:
            b["token_type_ids"] = b["token_type_ids"] % 2
        return r

    run("qdqmmb.optimum.bert", lambda t: quantize_static(
        src("optimum.bert"), t, bert_reader(), quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, extra_options={"MatMulConstBOnly": True}))

    def qdq4(name):
        def f(t):
            from onnxruntime.quantization.matmul_nbits_quantizer import (DefaultWeightOnlyQuantConfig,
                                                                         MatMulNBitsQuantizer)

            cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=False, quant_format=QuantFormat.QDQ)
            q = MatMulNBitsQuantizer(onnx.load(src(name)), algo_config=cfg)
            q.process()
            q.model.save_model_to_file(t, use_external_data_format=False)
        return f

    run("qdq4.optimum.qwen2", qdq4("optimum.qwen2"))

    # -- external data: one .data file beside the model (weights zeroed first)
    name = "ext.yolo.11-cls"
    if not os.path.exists(dst(name)) and os.path.exists(src("yolo.11-cls")):
        from unseen3 import _zero_big_floats

        m = _zero_big_floats(onnx.load(src("yolo.11-cls")))
        onnx.save_model(m, dst(name), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".onnx.data", size_threshold=1024)
        print("wrote", dst(name), flush=True)
    _stabilize(out)


if __name__ == "__main__":
    # optimum's merge_decoders names the initializers it deduplicates in set order: a fixed hash
    # seed keeps the merged decoders' names from run to run
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": "0"})
    what, out, scratch = sys.argv[1], sys.argv[2], sys.argv[3]
    {"export": export, "derive": derive}[what](out, scratch)
