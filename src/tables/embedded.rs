//! The tables embedded in the binary, sorted by version. `tests/it/tables.rs` checks this list
//! against `kernel-tables/*.toml`, so a table cannot be added without being embedded, and checks
//! every `ort-<v>.bin` (the compact form that is decoded at run time, [`super::compact`])
//! against its TOML. Only the compact form is embedded: the TOML is the reviewed source.

use super::Bundled;

macro_rules! release {
    ($v:literal) => {
        Bundled::new(
            $v,
            concat!("ort-", $v, ".toml"),
            include_bytes!(concat!("../../kernel-tables/ort-", $v, ".bin")),
            include_str!(concat!("../../kernel-tables/attributes/ort-", $v, ".txt")),
        )
    };
}

/// The tables of packages other than `onnxruntime-gpu`: `package!("onnxruntime-webgpu",
/// "1.25.1", "1.25.1")` embeds `kernel-tables/onnxruntime-webgpu-1.25.1.{bin,toml}` run in ORT
/// 1.25.1 (a plugin's table names the ORT release it was enumerated in), with the attribute list
/// of that ORT release.
#[allow(unused_macros)]
macro_rules! package {
    ($p:literal, $v:literal, $ort:literal) => {
        Bundled::of_package(
            $p,
            $v,
            $ort,
            concat!($p, "-", $v, ".toml"),
            include_bytes!(concat!("../../kernel-tables/", $p, "-", $v, ".bin")),
            include_str!(concat!("../../kernel-tables/attributes/ort-", $ort, ".txt")),
        )
    };
}

pub(super) static PACKAGES: [Bundled; 0] = [];

pub(super) static RELEASES: [Bundled; 13] = [
    release!("1.19.2"),
    release!("1.20.2"),
    release!("1.21.1"),
    release!("1.22.0"),
    release!("1.23.2"),
    release!("1.24.4"),
    release!("1.25.1"),
    release!("1.26.0"),
    release!("1.27.0"),
    release!("1.28.0"),
    release!("1.29.0"),
    release!("1.30.0"),
    release!("1.31.1"),
];
