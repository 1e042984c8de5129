#!/usr/bin/env python3
"""The unseen corpus (tests/fixtures/realworld/unseen/): models made after the CPU-only
transformers were written, never tuned on, to measure `--ep cpu` and the CUDA placement honestly.

  # 1. torch exports (torch 2.15, torch.onnx.export(dynamo=False), opset 17), in a venv with
  #    tools/tsexport/requirements.txt
  python tools/realworld/unseen.py export tests/fixtures/realworld/unseen
  # 2. fp16 conversion and ORT's transformer optimizer (of the decoders that
  #    `tools/tsexport/export.py target/tsdecoders` writes), with onnx 1.23.2 + onnxruntime 1.31.1 +
  #    onnxconverter-common
  python tools/realworld/unseen.py derive tests/fixtures/realworld/unseen target/tsdecoders
  # 3. truth: tools/realworld/record_unseen.sh (stubbed GPU) and cpu_truth.py (CPU wheels)

Models (seeded, small):
  det.*      a convolutional detector: Conv-BN-ReLU backbone with MaxPool, a top-down path with
             nearest Upsample (x2) + Add, a Concat, a decode head (Sigmoid, grid Add, Reshape)
  crnn.*     a CRNN recogniser: Conv-BN-ReLU + MaxPool stack, a bidirectional LSTM, a Linear and
             LogSoftmax over the classes
  unet.*     an encoder/decoder with AveragePool, Resize (nearest, asymmetric, floor), skip Concats,
             depthwise and grouped convolutions, GlobalAveragePool + Linear
  fp16-io32.* / fp16.*  onnxconverter_common.float16 (keep_io_types True/False), of the above and
             of the gpt_neox TorchScript decoder of tools/tsexport/export.py
  ortopt.*   onnxruntime.transformers.optimizer.optimize_model(model_type="gpt2") of its gpt2 decoder
(The plain TorchScript decoders are tests/fixtures/tsdecoders/, tuned on by another branch.)
"""
import os
import sys


def export(out):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)

    def cbr(cin, cout, k=3, s=1, g=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU())

    class Detector(nn.Module):
        def __init__(self, classes=3, anchors=2):
            super().__init__()
            self.c1 = cbr(3, 16, 3, 2)
            self.c2 = cbr(16, 32, 3, 1)
            self.pool = nn.MaxPool2d(2)
            self.c3 = cbr(32, 64, 3, 2)
            self.lat = nn.Conv2d(64, 32, 1)
            self.fuse = cbr(64, 32, 3)
            self.head = nn.Conv2d(32, anchors * (5 + classes), 1)
            self.a, self.k = anchors, 5 + classes

        def forward(self, x):
            p2 = self.pool(self.c2(self.c1(x)))
            p3 = self.c3(p2)
            up = F.interpolate(self.lat(p3), scale_factor=2.0, mode="nearest")
            f = self.fuse(torch.cat([up + p2, p2], 1))
            y = self.head(f)
            b, _, h, w = y.shape
            y = y.view(b, self.a, self.k, h, w).permute(0, 1, 3, 4, 2)
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            grid = torch.stack([gx, gy], -1).to(y.dtype)
            xy = (torch.sigmoid(y[..., :2]) + grid) * 8.0
            wh = torch.exp(y[..., 2:4]) * 16.0
            rest = torch.sigmoid(y[..., 4:])
            return torch.cat([xy, wh, rest], -1).reshape(b, -1, self.k)

    class CRNN(nn.Module):
        def __init__(self, classes=37):
            super().__init__()
            self.cnn = nn.Sequential(cbr(1, 16), nn.MaxPool2d(2), cbr(16, 32), nn.MaxPool2d(2), cbr(32, 64),
                                     nn.MaxPool2d((2, 1)))
            self.rnn = nn.LSTM(64 * 4, 48, bidirectional=True, batch_first=False)
            self.fc = nn.Linear(96, classes)

        def forward(self, x):
            f = self.cnn(x)
            b, c, h, w = f.shape
            f = f.permute(3, 0, 1, 2).reshape(w, b, c * h)
            y, _ = self.rnn(f)
            return F.log_softmax(self.fc(y), -1)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1 = cbr(3, 16)
            self.e2 = cbr(16, 32)
            self.dw = cbr(32, 32, 3, 1, 32)
            self.e3 = cbr(32, 64, 3, 1, 2)
            self.d2 = cbr(96, 32)
            self.d1 = cbr(48, 16)
            self.out = nn.Conv2d(16, 4, 1)
            self.cls = nn.Linear(64, 5)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(F.avg_pool2d(a, 2))
            c = self.e3(self.dw(F.avg_pool2d(b, 2)))
            u = F.interpolate(c, scale_factor=2.0, mode="nearest")
            d = self.d2(torch.cat([u, b], 1))
            d = self.d1(torch.cat([F.interpolate(d, scale_factor=2.0, mode="nearest"), a], 1))
            logits = self.cls(torch.flatten(F.adaptive_avg_pool2d(c, 1), 1))
            return self.out(d), logits

    os.makedirs(out, exist_ok=True)
    jobs = [
        ("det.ts.op17.onnx", Detector(), (torch.randn(1, 3, 64, 64),), ["images"], ["boxes"],
         {"images": {0: "batch"}, "boxes": {0: "batch"}}),
        ("crnn.ts.op17.onnx", CRNN(), (torch.randn(1, 1, 32, 64),), ["image"], ["log_probs"],
         {"image": {0: "batch", 3: "width"}, "log_probs": {0: "steps", 1: "batch"}}),
        ("unet.ts.op17.onnx", UNet(), (torch.randn(1, 3, 32, 32),), ["x"], ["mask", "logits"],
         {"x": {0: "batch"}}),
    ]
    for name, m, args, ins, outs, dyn in jobs:
        m.eval()
        torch.onnx.export(m, args, os.path.join(out, name), opset_version=17, input_names=ins, output_names=outs,
                          dynamic_axes=dyn, dynamo=False)
        print("wrote", name)


def derive(out, tsdir):
    import onnx
    from onnxconverter_common import float16
    from onnxruntime.transformers import optimizer

    for src, keep in (("det.ts.op17.onnx", True), ("unet.ts.op17.onnx", False), ("crnn.ts.op17.onnx", True)):
        m = onnx.load(os.path.join(out, src))
        m16 = float16.convert_float_to_float16(m, keep_io_types=keep, disable_shape_infer=False)
        onnx.save(m16, os.path.join(out, ("fp16-io32." if keep else "fp16.") + src))
    m = onnx.load(os.path.join(tsdir, "gpt_neox.L2.ts.op17.onnx"))
    m16 = float16.convert_float_to_float16(m, keep_io_types=True, disable_shape_infer=False)
    onnx.save(m16, os.path.join(out, "fp16-io32.dec.gpt_neox.L2.ts.op17.onnx"))
    opt = optimizer.optimize_model(os.path.join(tsdir, "gpt2.L2.ts.op17.onnx"), model_type="gpt2", num_heads=4,
                                   hidden_size=64, opt_level=0, use_gpu=False)
    opt.save_model_to_file(os.path.join(out, "ortopt.dec.gpt2.L2.ts.op17.onnx"))
    print("derived")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "derive":
        derive(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
