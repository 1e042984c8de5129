"""Run a published onnxruntime-gpu wheel on a machine without a GPU.

The CUDA provider library of a wheel links against CUDA, cuBLAS, cuDNN, ... which are not installed
here. We build one stub shared library per missing SONAME, exporting every symbol that the ORT
libraries import from it (with the right symbol versions), so that the dynamic loader is satisfied.
ORT then registers its CUDA kernels and runs its partitioner; no CUDA code is ever executed, except a
few calls made while the provider initialises (device count, stream and handle creation, ...),
which get hand-written answers below.

Layout of the cache (outside the repository), per release:
    <cache>/wheels/onnxruntime_gpu-<ver>-....whl     the published wheel, kept for its sha256
    <cache>/<ver>/onnxruntime/...                   the unpacked Python package
    <cache>/<ver>/stubs/lib*.so*                    the generated stubs
"""
import collections
import glob
import hashlib
import os
import re
import subprocess
import sys
import zipfile

CACHE = os.environ.get("KERNEL_TABLES_CACHE", os.path.expanduser("~/.cache/onnx-lint-tables"))
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def release_dir(ver):
    return os.path.join(CACHE, ver)


def fetch_wheel(ver):
    """Return (path, sha256) of the onnxruntime-gpu wheel of `ver`, downloading it once."""
    wdir = os.path.join(CACHE, "wheels")
    os.makedirs(wdir, exist_ok=True)
    pattern = os.path.join(wdir, f"onnxruntime_gpu-{ver}-*.whl")
    found = glob.glob(pattern)
    if not found:
        pyver = f"{sys.version_info.major}{sys.version_info.minor}"
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wdir, f"onnxruntime-gpu=={ver}",
               "--only-binary=:all:", "--python-version", pyver, "--implementation", "cp"]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        subprocess.run(cmd, check=True)
        found = glob.glob(pattern)
    if len(found) != 1:
        raise SystemExit(f"expected one wheel for {ver}, found {found}")
    h = hashlib.sha256()
    with open(found[0], "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return found[0], h.hexdigest()


def prepare(ver):
    """Download, unpack and stub release `ver`; return (release dir, wheel file name, sha256)."""
    wheel, sha = fetch_wheel(ver)
    d = release_dir(ver)
    marker = os.path.join(d, ".ready")
    if not os.path.exists(marker):
        os.makedirs(d, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(d, [n for n in z.namelist() if n.startswith("onnxruntime/")])
        for f in glob.glob(os.path.join(capi_dir(ver), "*.so*")):
            os.chmod(f, 0o755)
        build_stubs(ver)
        with open(marker, "w") as f:
            f.write(sha + "\n")
    return d, os.path.basename(wheel), sha


def capi_dir(ver):
    return os.path.join(release_dir(ver), "onnxruntime", "capi")


def stub_dir(ver):
    return os.path.join(release_dir(ver), "stubs")


# Functions whose return value or out-parameters matter while the CUDA provider initialises.
# Everything else returns 0 (success) and writes nothing.
STUB_BODIES = {
    "cudaGetErrorString": 'const char* cudaGetErrorString(int e){return "stub";}',
    "cudaGetErrorName": 'const char* cudaGetErrorName(int e){return "stub";}',
    "cublasGetStatusString": 'const char* cublasGetStatusString(int e){return "stub";}',
    "cudnnGetErrorString": 'const char* cudnnGetErrorString(int e){return "stub";}',
    "cudaGetDeviceCount": "int cudaGetDeviceCount(int* n){*n=1;return 0;}",
    "cudaGetDevice": "int cudaGetDevice(int* d){*d=0;return 0;}",
    "cudaRuntimeGetVersion": "int cudaRuntimeGetVersion(int* n){*n=12080;return 0;}",
    "cudaDriverGetVersion": "int cudaDriverGetVersion(int* n){*n=13000;return 0;}",
    "cudnnGetVersion": "unsigned long cudnnGetVersion(void){return 90000;}",
    "getInferLibVersion": "int getInferLibVersion(void){return 100000;}",
    "getNvOnnxParserVersion": "int getNvOnnxParserVersion(void){return 100000;}",
    "__cudaRegisterFatBinary": "static void* fatbin[4]; void** __cudaRegisterFatBinary(void* p){return fatbin;}",
    # Allocations hand out host memory so that the session state can be finalised.
    "cudaMalloc": "int cudaMalloc(void** p, unsigned long n){*p=calloc(1,n?n:1);return 0;}",
    "cudaMallocHost": "int cudaMallocHost(void** p, unsigned long n){*p=calloc(1,n?n:1);return 0;}",
    "cudaHostAlloc": "int cudaHostAlloc(void** p, unsigned long n, unsigned f){*p=calloc(1,n?n:1);return 0;}",
    "cudaMallocAsync": "int cudaMallocAsync(void** p, unsigned long n, void* s){*p=calloc(1,n?n:1);return 0;}",
    "cudaMallocManaged": "int cudaMallocManaged(void** p, unsigned long n, unsigned f){*p=calloc(1,n?n:1);return 0;}",
    "cudaMemGetInfo": "int cudaMemGetInfo(unsigned long* f, unsigned long* t){*f=*t=(unsigned long)80<<30;return 0;}",
    "cudaStreamCreate": "int cudaStreamCreate(void** s){*s=(void*)0x10;return 0;}",
    "cudaStreamCreateWithFlags": "int cudaStreamCreateWithFlags(void** s, unsigned f){*s=(void*)0x10;return 0;}",
    "cudaEventCreate": "int cudaEventCreate(void** s){*s=(void*)0x10;return 0;}",
    "cudaEventCreateWithFlags": "int cudaEventCreateWithFlags(void** s, unsigned f){*s=(void*)0x10;return 0;}",
    "cublasCreate_v2": "int cublasCreate_v2(void** h){*h=(void*)0x10;return 0;}",
    "cublasLtCreate": "int cublasLtCreate(void** h){*h=(void*)0x10;return 0;}",
    "cudnnCreate": "int cudnnCreate(void** h){*h=(void*)0x10;return 0;}",
}
# Imported symbols that the system or ORT itself provides.
SYSTEM_SYMBOL = re.compile(r"GLIBC|GCC_|CXXABI|GLIBCXX|^_ITM_|^__gmon|^__gcov|^_Unwind|^__cxa|^_Z|^Provider_GetHost")


def _missing_sonames(libs, env):
    missing = set()
    for f in libs:
        out = subprocess.run(["ldd", f], capture_output=True, text=True, env=env).stdout
        missing |= set(re.findall(r"^\s*(\S+) => not found", out, re.M))
    return missing


def build_stubs(ver):
    capi, stubs = capi_dir(ver), stub_dir(ver)
    os.makedirs(stubs, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=stubs + ":" + capi)
    libs = [f for f in glob.glob(os.path.join(capi, "*.so*")) if "pybind" not in f]
    missing = _missing_sonames(libs, env)
    versioned = collections.defaultdict(set)  # SONAME -> symbols imported with that version tag
    unversioned = set()
    for f in libs:
        out = subprocess.run(["nm", "-D", "--undefined-only", f], capture_output=True, text=True).stdout
        for line in out.splitlines():
            sym = line.split()[-1]
            if "@" in sym:
                name, tag = sym.split("@", 1)
                tag = tag.lstrip("@")
                if tag in missing:
                    versioned[tag].add(name)
            elif not SYSTEM_SYMBOL.search(sym):
                unversioned.add(sym)
    defined = set()
    for f in glob.glob(os.path.join(capi, "*.so*")):
        out = subprocess.run(["nm", "-D", "--defined-only", f], capture_output=True, text=True).stdout
        defined |= {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()}
    # Unversioned CUDA-looking imports that no ORT library defines go into every stub; the loader
    # takes the first definition it finds.
    extra = {s for s in unversioned - defined if re.match(r"(cu|nv|create|get|init)", s) or s.startswith("__cuda")}
    for soname in sorted(missing):
        names = versioned.get(soname, set()) | extra
        body = "\n".join(STUB_BODIES.get(n, f"long {n}(void){{return 0;}}") for n in sorted(names))
        cfile = os.path.join(stubs, soname + ".c")
        with open(cfile, "w") as f:
            f.write("#include <stdlib.h>\n" + (body or "int stub_empty(void){return 0;}") + "\n")
        cmd = ["gcc", "-shared", "-fPIC", "-o", os.path.join(stubs, soname), cfile, f"-Wl,-soname,{soname}"]
        if versioned.get(soname):
            mapfile = os.path.join(stubs, soname + ".map")
            with open(mapfile, "w") as f:
                f.write(soname + " {\n global:\n" + "".join(f"  {n};\n" for n in sorted(names)) + " local: *;\n};\n")
            cmd.append(f"-Wl,--version-script={mapfile}")
        subprocess.run(cmd, check=True)
    _stub_driver(stubs, libs)
    still = _missing_sonames(libs, env)
    if still:
        raise SystemExit(f"libraries still missing after stubbing: {sorted(still)}")


def _stub_driver(stubs, libs):
    """A stub CUDA driver (libcuda.so.1), which no library links against but some dlopen.

    ORT 1.22.0's CUDA provider dlopens libcuda.so.1 in a static initialiser and ORT_ENFORCEs that it
    loaded; the exception is then built while the provider's host pointer is still null, which
    crashes the process. The stub exports every `cu*` driver entry point named in the provider
    libraries' strings, so that its dlsym calls succeed too.
    """
    names = set()
    for f in libs:
        if "providers_cuda" not in f:
            continue
        with open(f, "rb") as fh:
            data = fh.read()
        names |= {m.decode() for m in re.findall(rb"(?<=\0)cu[A-Z][A-Za-z0-9_]{2,60}(?=\0)", data)}
    if not names:
        return
    cfile = os.path.join(stubs, "libcuda.so.1.c")
    body = "\n".join(f"int {n}(void){{return 0;}}" for n in sorted(names))
    with open(cfile, "w") as f:
        f.write(body + "\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(stubs, "libcuda.so.1"), cfile,
                    "-Wl,-soname,libcuda.so.1"], check=True)


def child_env(ver, verbose=False):
    env = dict(os.environ, LD_LIBRARY_PATH=stub_dir(ver), PYTHONPATH=release_dir(ver))
    if verbose:
        env["ORT_LOGGING_LEVEL"] = "0"
    return env


def run_child(ver, script, *args, timeout=900):
    """Run a Python snippet with release `ver` importable as `onnxruntime`."""
    return subprocess.run([sys.executable, "-c", script, *args], env=child_env(ver), capture_output=True, text=True,
                          timeout=timeout)
