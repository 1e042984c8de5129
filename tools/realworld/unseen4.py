#!/usr/bin/env python3
"""The fourth unseen corpus (tests/fixtures/realworld/unseen4/, issue 16): made after the fixes of
2026-12-02 were written, to measure them on models none of them was tuned on. Same rules as
unseen3.py (small configs, seeded, floating-point tensors of 256 or more elements zeroed).

  # venv: tools/realworld/unseen3-requirements.txt (the same pins)
  python tools/realworld/unseen4.py torch tests/fixtures/realworld/unseen4 target/unseen4
  python tools/realworld/unseen4.py derive tests/fixtures/realworld/unseen4 target/unseen4
  # truth: SET=unseen4 tools/realworld/record.sh 1.23.2 1.24.4 1.31.1, then cpu_truth.py
  # (a rerun keeps the files it finds: delete them to make them again)

File names say how a model was made:
  tv.*     torchvision by torch.onnx.export (TorchScript, opset 17): SSD with a small VGG-like
           backbone (DefaultBoxGenerator, per-class NMS), FCOS and Keypoint R-CNN on a small FPN,
           ShuffleNetV2 (x0.5: channel shuffle, Split), SqueezeNet 1.1 (Fire modules, Concat)
  hf.*     transformers at tiny configs: Swin (window attention, torch.roll), MobileViT (unfold
           as Reshape/Transpose), BART encoder-decoder (no cache)
  pt.*     plain torch modules: a Conformer block (depthwise Conv1d, GLU, SiLU, BatchNorm1d,
           MultiheadAttention), nn.TransformerEncoder with a key padding mask
  qdq.* / qop.* / qdyn.*  onnxruntime.quantization (static QDQ per-channel, QOperator, dynamic)
  fp16.*   onnxconverter-common float16 with keep_io_types
  ortopt.* ORT's transformer optimizer (use_gpu=True), model_type given per model
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unseen3 import _save  # noqa: E402


def torch_models(out, scratch):
    import onnx
    import torch
    import torch.nn as nn

    os.makedirs(out, exist_ok=True)
    os.makedirs(scratch, exist_ok=True)

    def keep(name, tmp):
        m = onnx.load(tmp, load_external_data=True)
        onnx.save_model(m, os.path.join(scratch, name + ".onnx"), save_as_external_data=False)
        _save(m, os.path.join(out, name + ".onnx"))

    def ts(name, module, args, names, outs, axes, opset=17):
        if os.path.exists(os.path.join(out, name + ".onnx")):
            return
        tmp = os.path.join(scratch, name + ".tmp.onnx")
        try:
            torch.onnx.export(module.eval(), args, tmp, dynamo=False, opset_version=opset, input_names=names,
                              output_names=outs, dynamic_axes=axes)
        except Exception as e:  # an export that fails is reported and skipped
            print("skip", name, type(e).__name__, str(e)[:200], flush=True)
            return
        keep(name, tmp)

    from collections import OrderedDict

    import torchvision
    from torchvision.models.detection import FCOS, KeypointRCNN
    from torchvision.models.detection.ssd import SSD
    from torchvision.models.detection.anchor_utils import AnchorGenerator, DefaultBoxGenerator
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.ssd import SSDHead

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
            self.l2 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
            self.l3 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())

        def forward(self, x):
            return self.l3(self.l2(self.l1(x)))

    def fpn(ch=16):
        return BackboneWithFPN(Body(), {"l2": "0", "l3": "1"}, [16, 16], ch)

    img = ([torch.rand(3, 64, 64)],)
    det_axes = {"images": {1: "h", 2: "w"}}

    class SsdBody(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
            self.b = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU())

        def forward(self, x):
            a = self.a(x)
            return OrderedDict([("0", a), ("1", self.b(a))])

    torch.manual_seed(0)
    gen = DefaultBoxGenerator([[2], [2, 3]])
    ssd = SSD(SsdBody(), gen, (64, 64), num_classes=3, head=SSDHead([16, 16], gen.num_anchors_per_location(), 3),
              topk_candidates=50, detections_per_img=10)
    ts("tv.ssd", ssd, img, ["images"], ["boxes", "scores", "labels"], det_axes)
    torch.manual_seed(0)
    ag = AnchorGenerator(sizes=((16,), (32,), (64,)), aspect_ratios=((1.0,),) * 3)
    from torchvision.models.detection.fcos import FCOSHead

    fcos = FCOS(fpn(32), num_classes=3, head=FCOSHead(32, 1, 3, num_convs=1), anchor_generator=ag, min_size=64, max_size=64, topk_candidates=50,
                detections_per_img=10)
    ts("tv.fcos", fcos, img, ["images"], ["boxes", "scores", "labels"], det_axes)
    torch.manual_seed(0)
    from torchvision.ops import MultiScaleRoIAlign
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.keypoint_rcnn import KeypointRCNNHeads, KeypointRCNNPredictor

    ag3 = AnchorGenerator(sizes=((16,), (32,), (64,)), aspect_ratios=((0.5, 1.0, 2.0),) * 3)
    kp = KeypointRCNN(fpn(), num_classes=None, rpn_anchor_generator=ag3,
                      box_roi_pool=MultiScaleRoIAlign(["0", "1"], 7, 2), box_head=TwoMLPHead(16 * 49, 32),
                      box_predictor=FastRCNNPredictor(32, 2),
                      keypoint_roi_pool=MultiScaleRoIAlign(["0", "1"], 14, 2),
                      keypoint_head=KeypointRCNNHeads(16, [16, 16]), keypoint_predictor=KeypointRCNNPredictor(16, 5),
                      min_size=64, max_size=64, box_detections_per_img=10, rpn_pre_nms_top_n_test=50,
                      rpn_post_nms_top_n_test=20)
    ts("tv.keypointrcnn", kp, img, ["images"], ["boxes", "labels", "scores", "keypoints", "keypoints_scores"],
       det_axes)
    torch.manual_seed(0)
    shuf = torchvision.models.shufflenetv2.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10)
    x64 = (torch.rand(1, 3, 64, 64),)
    b_axes = {"input": {0: "batch"}}
    ts("tv.shufflenetv2", shuf, x64, ["input"], ["logits"], b_axes)
    torch.manual_seed(0)
    sq = torchvision.models.squeezenet1_1(weights=None, num_classes=10)
    ts("tv.squeezenet", sq, x64, ["input"], ["logits"], b_axes, opset=13)

    import transformers as tf

    class Last(nn.Module):
        def __init__(self, m, attr="last_hidden_state"):
            super().__init__()
            self.m, self.attr = m, attr

        def forward(self, *x):
            return getattr(self.m(*x), self.attr)

    torch.manual_seed(0)
    swin = tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                                      window_size=4)).eval()
    ts("hf.swin", Last(swin), (torch.rand(1, 3, 32, 32),), ["pixel_values"], ["last_hidden_state"],
       {"pixel_values": {0: "batch"}})
    torch.manual_seed(0)
    mvit = tf.MobileViTModel(tf.MobileViTConfig(image_size=64, hidden_sizes=[16, 24, 32],
                                                neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 64],
                                                num_attention_heads=2, expand_ratio=2.0)).eval()
    ts("hf.mobilevit", Last(mvit), x64, ["pixel_values"], ["last_hidden_state"], {"pixel_values": {0: "batch"}})
    torch.manual_seed(0)
    bart = tf.BartModel(tf.BartConfig(vocab_size=256, d_model=32, encoder_layers=2, decoder_layers=2,
                                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                      decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False)).eval()

    class Bart(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                          use_cache=False).last_hidden_state

    ids = torch.randint(1, 256, (2, 9))
    ts("hf.bart", Bart(bart), (ids, torch.ones_like(ids), torch.randint(1, 256, (2, 4))),
       ["input_ids", "attention_mask", "decoder_input_ids"], ["last_hidden_state"],
       {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
        "decoder_input_ids": {0: "batch", 1: "dec"}})

    class Conformer(nn.Module):
        def __init__(self, d=32, heads=4, k=7):
            super().__init__()
            self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
            self.ln_att = nn.LayerNorm(d)
            self.att = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln_conv = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.glu = nn.GLU(dim=1)
            self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)
            self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
            self.ln = nn.LayerNorm(d)

        def forward(self, x):
            x = x + 0.5 * self.ff1(x)
            h = self.ln_att(x)
            x = x + self.att(h, h, h, need_weights=False)[0]
            c = self.ln_conv(x).transpose(1, 2)
            c = self.pw2(torch.nn.functional.silu(self.bn(self.dw(self.glu(self.pw1(c))))))
            x = x + c.transpose(1, 2)
            return self.ln(x + 0.5 * self.ff2(x))

    torch.manual_seed(0)
    ts("pt.conformer", Conformer(), (torch.rand(2, 20, 32),), ["x"], ["y"], {"x": {0: "batch", 1: "time"}})

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True, activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x, pad):
            return self.enc(x, src_key_padding_mask=pad)

    torch.manual_seed(0)
    ts("pt.transformer-enc", Enc(), (torch.rand(2, 10, 32), torch.zeros(2, 10, dtype=torch.bool)), ["x", "pad"],
       ["y"], {"x": {0: "batch", 1: "seq"}, "pad": {0: "batch", 1: "seq"}})


class Reader:
    """Calibration batches for onnxruntime.quantization: seeded random floats (int64 1..15 for
    other inputs), the graph's dims with symbolic ones as 1 (unseen5.py uses it too)."""

    def __init__(self, model, n=4):
        import numpy as np
        import onnx

        m = onnx.load(model, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        rng = np.random.default_rng(0)
        self.batches = []
        for _ in range(n):
            feed = {}
            for i in m.graph.input:
                if i.name in inits:
                    continue
                t = i.type.tensor_type
                dims = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
                if t.elem_type == onnx.TensorProto.FLOAT:
                    feed[i.name] = rng.random(dims, dtype=np.float32)
                else:
                    feed[i.name] = rng.integers(1, 16, dims).astype(np.int64)
            self.batches.append(feed)
        self.it = iter(self.batches)

    def get_next(self):
        return next(self.it, None)


def derive(out, scratch):
    import numpy as np
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    def src(name):
        return os.path.join(scratch, name + ".onnx")

    def dst(name):
        return os.path.join(out, name + ".onnx")

    def run(name, fn):
        if os.path.exists(dst(name)):
            return
        tmp = os.path.join(scratch, name + ".onnx")
        try:
            fn(tmp)
        except Exception as e:
            print("skip", name, type(e).__name__, str(e)[:200], flush=True)
            return
        _save(onnx.load(tmp, load_external_data=True), dst(name))

    run("qdq.tv.shufflenetv2", lambda t: quantize_static(
        src("tv.shufflenetv2"), t, Reader(src("tv.shufflenetv2")), quant_format=QuantFormat.QDQ, per_channel=True,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8))
    run("qop.tv.ssd", lambda t: quantize_static(
        src("tv.ssd"), t, Reader(src("tv.ssd")), quant_format=QuantFormat.QOperator,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8))
    run("qdq.hf.swin", lambda t: quantize_static(
        src("hf.swin"), t, Reader(src("hf.swin")), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8))
    run("qdyn.hf.bart", lambda t: quantize_dynamic(src("hf.bart"), t, weight_type=QuantType.QInt8))
    run("qdyn.pt.conformer", lambda t: quantize_dynamic(src("pt.conformer"), t, weight_type=QuantType.QUInt8,
                                                          per_channel=True))

    from onnxconverter_common import float16

    def fp16(name):
        def f(t):
            m = float16.convert_float_to_float16(onnx.load(src(name)), keep_io_types=True)
            onnx.save_model(m, t)
        return f

    run("fp16.hf.mobilevit", fp16("hf.mobilevit"))
    run("fp16.pt.transformer-enc", fp16("pt.transformer-enc"))

    from onnxruntime.transformers import optimizer

    def ortopt(name, model_type, heads, hidden, fp16=False):
        def f(t):
            o = optimizer.optimize_model(src(name), model_type=model_type, num_heads=heads, hidden_size=hidden,
                                         use_gpu=True, opt_level=0)
            if fp16:
                o.convert_float_to_float16(keep_io_types=True)
            o.save_model_to_file(t)
        return f

    run("ortopt.hf.swin", ortopt("hf.swin", "swin", 0, 0))
    run("ortopt.hf.bart", ortopt("hf.bart", "bart", 4, 32))
    run("ortopt-fp16.hf.bart", ortopt("hf.bart", "bart", 4, 32, fp16=True))
    run("ortopt.pt.transformer-enc", ortopt("pt.transformer-enc", "bert", 4, 32))


if __name__ == "__main__":
    what, out, scratch = sys.argv[1], sys.argv[2], sys.argv[3]
    {"torch": torch_models, "derive": derive}[what](out, scratch)
