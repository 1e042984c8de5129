//! The live session (feature `live`): ONNX Runtime and the CUDA driver are both loaded at run
//! time, so this builds and runs on machines that have neither.

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ort::logging::LogLevel;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use super::log::format_line;
use crate::placer::OptLevel;

/// The version string of an ONNX Runtime library (`OrtGetApiBase()->GetVersionString()`), read
/// without initialising it.
pub fn library_version(path: &Path) -> Result<String, String> {
    // SAFETY: loading ONNX Runtime runs its static initialisers only; the symbol has the C API's
    // signature, and the returned base and string are static in the library, which stays loaded
    // (it is loaded again by `ort` below, and leaked here on purpose).
    unsafe {
        let lib = libloading::Library::new(path)
            .map_err(|e| format!("could not load {}: {e}", path.display()))?;
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const ort::sys::OrtApiBase> =
            lib.get(b"OrtGetApiBase").map_err(|_| {
                format!(
                    "{} does not export OrtGetApiBase: not ONNX Runtime",
                    path.display()
                )
            })?;
        let base = get();
        if base.is_null() {
            return Err("OrtGetApiBase returned null".into());
        }
        let v = ((*base).GetVersionString)();
        if v.is_null() {
            return Err("GetVersionString returned null".into());
        }
        let version = CStr::from_ptr(v).to_string_lossy().to_string();
        std::mem::forget(lib);
        Ok(version)
    }
}

/// The oldest ONNX Runtime the `ort` crate accepts here (its C API version 17).
pub const MIN_MINOR: u32 = ort::MINOR_VERSION;

/// A CUDA device as the driver reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Device {
    pub ordinal: i32,
    pub name: String,
    pub memory_mib: usize,
    pub compute_capability: String,
}

/// What the CUDA driver said.
#[derive(Debug, Clone)]
pub enum CudaProbe {
    Devices(Vec<Device>),
    /// No usable device, and why.
    None(String),
}

/// The driver API symbols [`probe_cuda`] calls.
const DRIVER_SYMBOLS: &[&[u8]] = &[
    b"cuInit",
    b"cuDeviceGetCount",
    b"cuDeviceGet",
    b"cuDeviceGetName",
    b"cuDeviceTotalMem_v2",
    b"cuDeviceGetAttribute",
];

/// Looks for CUDA devices through the driver API (libcuda, loaded at run time).
pub fn probe_cuda() -> CudaProbe {
    // cudarc panics when the library it opens lacks a symbol: check the library it will pick
    // (the first of its candidates that opens) first.
    let mut usable = false;
    for name in cudarc::get_lib_name_candidates("cuda") {
        // SAFETY: opening the driver library runs its initialisers only.
        if let Ok(lib) = unsafe { libloading::Library::new(&name) } {
            // SAFETY: only looks the symbols up.
            let missing = DRIVER_SYMBOLS
                .iter()
                .find(|s| unsafe { lib.get::<unsafe extern "C" fn()>(**s) }.is_err());
            if let Some(s) = missing {
                return CudaProbe::None(format!(
                    "the CUDA driver library {name} lacks {}: not a usable NVIDIA driver",
                    String::from_utf8_lossy(s)
                ));
            }
            usable = true;
            break;
        }
    }
    if !usable {
        return CudaProbe::None(
            "no CUDA driver library (libcuda.so) on this machine: no NVIDIA driver".into(),
        );
    }
    // A panic must not escape, nor print: silence the hook while cudarc runs.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let probe = std::panic::catch_unwind(probe_cuda_inner);
    std::panic::set_hook(hook);
    probe.unwrap_or_else(|_| CudaProbe::None("the CUDA driver library could not be used".into()))
}

fn probe_cuda_inner() -> CudaProbe {
    use cudarc::driver::{result, sys};
    if let Err(e) = result::init() {
        return CudaProbe::None(format!("the CUDA driver did not initialise: {e:?}"));
    }
    let n = match result::device::get_count() {
        Ok(n) => n,
        Err(e) => return CudaProbe::None(format!("the CUDA driver lists no devices: {e:?}")),
    };
    if n <= 0 {
        return CudaProbe::None("the CUDA driver reports 0 devices".into());
    }
    let mut devices = Vec::new();
    for ordinal in 0..n {
        let Ok(dev) = result::device::get(ordinal) else {
            continue;
        };
        let name = result::device::get_name(dev).unwrap_or_else(|_| "?".into());
        // SAFETY: `dev` is a valid device handle from the driver.
        let memory_mib = unsafe { result::device::total_mem(dev) }.unwrap_or(0) >> 20;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.unwrap_or(0);
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        devices.push(Device {
            ordinal,
            name,
            memory_mib,
            compute_capability: format!("{major}.{minor}"),
        });
    }
    if devices.is_empty() {
        CudaProbe::None("the CUDA driver's devices could not be opened".into())
    } else {
        CudaProbe::Devices(devices)
    }
}

/// A finished live session.
#[derive(Debug, Clone)]
pub struct LiveSession {
    /// `Ok(())`, or the error session creation returned.
    pub session: Result<(), String>,
    /// Every message ORT logged while creating the session, one per line, in its default
    /// sink's shape.
    pub log: String,
    /// The CUDA EP was registered (else: CPU only).
    pub cuda: bool,
    /// Why the CUDA EP could not be registered, when it was asked for and the session fell back
    /// to CPU only.
    pub cuda_error: Option<String>,
    /// `(op, name)` of the nodes of the session graph ORT saved (every graph), for a CPU-only
    /// session whose model file is under [`MAX_SAVED_MODEL`]: ORT's log names no node of a
    /// graph placed on one provider, the saved graph does. `None` when nothing was saved.
    pub saved_nodes: Option<Vec<(String, String)>>,
}

/// Models up to this size have their CPU-only session graph saved and read back (protobuf's
/// 2 GiB limit stops ORT's own writer well above it).
pub const MAX_SAVED_MODEL: u64 = 1 << 30;

/// How deep the saved graph's subgraphs are read.
const MAX_SUBGRAPH_DEPTH: usize = 64;

/// `(op, name)` of every node of a saved model, subgraphs included.
fn saved_nodes(path: &Path) -> Option<Vec<(String, String)>> {
    use prost::Message;
    let bytes = std::fs::read(path).ok()?;
    let model = crate::model::proto::ModelProto::decode(bytes.as_slice()).ok()?;
    let mut out = Vec::new();
    fn walk(g: &crate::model::proto::GraphProto, depth: usize, out: &mut Vec<(String, String)>) {
        if depth > MAX_SUBGRAPH_DEPTH {
            return;
        }
        for n in &g.node {
            out.push((n.op_type().to_string(), n.name().to_string()));
            for a in &n.attribute {
                if let Some(sub) = &a.g {
                    walk(sub, depth + 1, out);
                }
                for sub in &a.graphs {
                    walk(sub, depth + 1, out);
                }
            }
        }
    }
    walk(model.graph.as_ref()?, 0, &mut out);
    Some(out)
}

/// Errors before a session could be attempted.
#[derive(Debug, Clone)]
pub struct SetupError(pub String);

fn level_of(l: OptLevel) -> GraphOptimizationLevel {
    match l {
        OptLevel::Disable => GraphOptimizationLevel::Disable,
        OptLevel::Basic => GraphOptimizationLevel::Level1,
        OptLevel::Extended => GraphOptimizationLevel::Level2,
        OptLevel::All => GraphOptimizationLevel::All,
    }
}

fn severity_letter(l: LogLevel) -> char {
    match l {
        LogLevel::Verbose => 'V',
        LogLevel::Info => 'I',
        LogLevel::Warning => 'W',
        LogLevel::Error => 'E',
        LogLevel::Fatal => 'F',
    }
}

/// Creates one session for `model` with the library at `dylib` (once per process), with the
/// CUDA EP on device `cuda` first when given (CPU is always the fallback; when the CUDA EP cannot
/// be registered the session is created with CPU only and `cuda_error` says why), at `level`,
/// with every log message captured.
pub fn run_session(
    dylib: &Path,
    model: &Path,
    level: OptLevel,
    cuda: Option<i32>,
) -> Result<LiveSession, SetupError> {
    // ORT allows one environment per process: it is made on first use, with a logger writing
    // into `LOG`, and shared by every later session (`verify` takes several models).
    static LOG: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    static ENV: OnceLock<Result<(PathBuf, ort::environment::Environment), String>> =
        OnceLock::new();
    let lines = Arc::clone(LOG.get_or_init(|| Arc::new(Mutex::new(Vec::new()))));
    let made = ENV.get_or_init(|| {
        let sink = Arc::clone(&lines);
        let logger: ort::logging::LoggerFunction = Arc::new(
            move |lvl: LogLevel, category: &str, id: &str, location: &str, message: &str| {
                // `ort` may hand the code location over as the category: take whichever looks
                // like `file.cc:123 Function`.
                let loc = if location.contains(".cc:") || location.contains(".h:") {
                    location
                } else if category.contains(".cc:") || category.contains(".h:") {
                    category
                } else {
                    location
                };
                if let Ok(mut v) = sink.lock() {
                    for m in message.split('\n') {
                        v.push(format_line(severity_letter(lvl), id, loc, m));
                    }
                }
            },
        );
        let env = ort::init_from(dylib)
            .map_err(|e| format!("could not load ONNX Runtime: {e}"))?
            .with_name("onnx-lint-verify")
            .with_telemetry(false)
            .with_logger(logger)
            .build()
            .map_err(|e| format!("could not create the ORT environment: {e}"))?;
        Ok((dylib.to_path_buf(), env))
    });
    let env = match made {
        Ok((path, env)) if path == dylib => env,
        Ok((path, _)) => {
            return Err(SetupError(format!(
                "ONNX Runtime is already loaded from {}: one library per process",
                path.display()
            )));
        }
        Err(e) => return Err(SetupError(e.clone())),
    };

    let options = || -> Result<ort::session::builder::SessionBuilder, SetupError> {
        let set = |e: ort::Error<_>| SetupError(format!("could not set session options: {e}"));
        Session::builder(env)
            .map_err(|e| SetupError(format!("could not create session options: {e}")))?
            .with_log_level(LogLevel::Verbose)
            .map_err(set)?
            .with_log_verbosity(0)
            .map_err(set)?
            .with_optimization_level(level_of(level))
            .map_err(set)
    };
    // A CPU-only session saves its session graph (a temporary file, removed below).
    static SAVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let small = std::fs::metadata(model).is_ok_and(|m| m.len() <= MAX_SAVED_MODEL);
    let save_to = std::env::temp_dir().join(format!(
        "onnx-lint-verify-{}-{}.onnx",
        std::process::id(),
        SAVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let cpu_options = || -> Result<ort::session::builder::SessionBuilder, SetupError> {
        let b = options()?;
        if !small {
            return Ok(b);
        }
        b.with_optimized_model_path(&save_to)
            .map_err(|e| SetupError(format!("could not set session options: {e}")))
    };
    let mut cuda_error = None;
    let mut builder = match cuda {
        Some(device) => {
            let ep = ort::ep::CUDA::default()
                .with_device_id(device)
                .build()
                .error_on_failure();
            match options()?.with_execution_providers([ep]) {
                Ok(b) => b,
                Err(e) => {
                    cuda_error = Some(e.to_string());
                    cpu_options()?
                }
            }
        }
        None => cpu_options()?,
    };
    if let Ok(mut v) = lines.lock() {
        v.clear();
    }
    let session = match builder.commit_from_file(model) {
        Ok(s) => {
            drop(s);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    };
    drop(builder);
    let log = lines.lock().map(|v| v.join("\n")).unwrap_or_default();
    let cpu_only = cuda.is_none() || cuda_error.is_some();
    let saved = (cpu_only && small && session.is_ok())
        .then(|| saved_nodes(&save_to))
        .flatten();
    let _ = std::fs::remove_file(&save_to);
    Ok(LiveSession {
        session,
        log,
        cuda: cuda.is_some() && cuda_error.is_none(),
        cuda_error,
        saved_nodes: saved,
    })
}
