"""Copy the decoders with every large float initializer zeroed (shapes and small constants kept)."""
import onnx, sys, os, numpy as np
from onnx import numpy_helper
src, dst = sys.argv[1], sys.argv[2]
for f in sorted(os.listdir(src)):
    if not f.endswith('.L2.ts.op17.onnx'):
        continue
    m = onnx.load(os.path.join(src, f))
    n = 0
    for i, t in enumerate(m.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.size > 1024 and a.dtype.kind == 'f':
            z = numpy_helper.from_array(np.zeros_like(a), t.name)
            m.graph.initializer[i].CopyFrom(z)
            n += 1
    onnx.save(m, os.path.join(dst, f))
    print(f, n)
