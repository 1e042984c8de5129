//! Distribution: the Python wheel (`pyproject.toml`), the release workflow
//! (`.github/workflows/release.yml`, which cannot run here: it is parsed, and its shell steps are
//! run), `cargo binstall`'s metadata, the Action's install step (a release's prebuilt binary, or
//! a build), and the pre-commit hooks. They must name the same version, targets and assets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{self, Run};

/// The targets the release publishes binaries and wheels for, with the runner each is built on
/// and the `RUNNER_OS`/`RUNNER_ARCH` of a runner that uses it.
const TARGETS: [(&str, &str, &str, &str); 5] = [
    ("x86_64-unknown-linux-gnu", "ubuntu", "Linux", "X64"),
    ("aarch64-unknown-linux-gnu", "ubuntu", "Linux", "ARM64"),
    ("x86_64-apple-darwin", "macos", "macOS", "X64"),
    ("aarch64-apple-darwin", "macos", "macOS", "ARM64"),
    ("x86_64-pc-windows-msvc", "windows", "Windows", "X64"),
];

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(support::repo().join(path)).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn toml_file(path: &str) -> toml::Table {
    let text = std::fs::read_to_string(support::repo().join(path)).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn run(mut cmd: Command) -> Run {
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a `run:` script with bash in `dir` with `env`.
fn bash(script: &str, dir: &Path, env: &BTreeMap<String, String>) -> Run {
    let mut cmd = Command::new("bash");
    cmd.arg("-e")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("ONNX_LINT_RELEASES_URL");
    cmd.envs(env);
    run(cmd)
}

#[test]
fn pyproject_builds_the_binary_wheel_of_this_version() {
    let py = toml_file("pyproject.toml");
    assert_eq!(
        py["build-system"]["build-backend"].as_str(),
        Some("maturin")
    );
    let requires = py["build-system"]["requires"].as_array().unwrap();
    assert!(
        requires
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.starts_with("maturin"))),
        "{requires:?}"
    );
    assert_eq!(py["tool"]["maturin"]["bindings"].as_str(), Some("bin"));
    assert_eq!(
        py["project"]["name"].as_str(),
        Some(env!("CARGO_PKG_NAME")),
        "the wheel's name is the crate's"
    );
    assert_eq!(
        py["project"]["version"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "pyproject.toml's version must be Cargo.toml's"
    );
}

/// The matrix of a job as (target, runner) pairs.
fn matrix(job: &Value) -> Vec<(String, String)> {
    job["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["target"].as_str().unwrap().to_string(),
                m["os"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn step<'a>(job: &'a Value, id: &str) -> &'a Value {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no step {id}"))
}

#[test]
fn release_workflow_builds_wheels_and_binaries_for_every_target_on_a_tag() {
    let wf = yaml(".github/workflows/release.yml");
    // serde_norway reads YAML 1.2: `on` is a string key.
    assert_eq!(wf["on"]["push"]["tags"], serde_json::json!(["v*"]));
    let jobs = &wf["jobs"];
    let expected: BTreeSet<&str> = TARGETS.iter().map(|t| t.0).collect();
    for name in ["binaries", "wheels"] {
        let m = matrix(&jobs[name]);
        let targets: BTreeSet<&str> = m.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(targets, expected, "{name}");
        assert_eq!(targets.len(), m.len(), "{name}: one entry per target");
        for (target, os) in &m {
            let (_, runner, _, _) = TARGETS.iter().find(|t| t.0 == target).unwrap();
            assert!(os.starts_with(runner), "{name}: {target} built on {os}");
        }
        assert_eq!(jobs[name]["runs-on"], "${{ matrix.os }}");
        assert_eq!(jobs[name]["needs"], "check");
    }
    let build = step(&jobs["binaries"], "build");
    assert_eq!(build["env"]["TARGET"], "${{ matrix.target }}");
    assert!(
        build["run"]
            .as_str()
            .unwrap()
            .contains("cargo build --release --locked --target \"$TARGET\"")
    );
    let wheel = step(&jobs["wheels"], "wheel");
    assert!(
        wheel["uses"]
            .as_str()
            .unwrap()
            .starts_with("PyO3/maturin-action@")
    );
    assert_eq!(wheel["with"]["target"], "${{ matrix.target }}");
    assert!(wheel["with"]["args"].as_str().unwrap().contains("--locked"));

    // Every asset reaches the release of the tag.
    let release = &jobs["release"];
    let needs: BTreeSet<&str> = release["needs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(
        needs,
        BTreeSet::from(["check", "binaries", "wheels", "sdist"])
    );
    assert_eq!(release["permissions"]["contents"], "write");
    let publish = release["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect::<String>();
    assert!(
        publish.contains("gh release create \"$GITHUB_REF_NAME\" dist/*"),
        "{publish}"
    );
    let sources = step(&jobs["check"], "sources")["run"].as_str().unwrap();
    assert!(sources.contains("bash .github/source-digest.sh > dist/sources.sha256"));

    // The check refuses a tag that is not the version of Cargo.toml and pyproject.toml.
    let check = step(&jobs["check"], "version")["run"].as_str().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    for (tag, code) in [(format!("v{version}"), 0), ("v999.0.0".to_string(), 1)] {
        let env = BTreeMap::from([("GITHUB_REF_NAME".to_string(), tag.clone())]);
        let out = bash(check, &support::repo(), &env);
        assert_eq!(out.code, code, "{tag}: {}{}", out.stdout, out.stderr);
    }
}

#[test]
fn binstall_metadata_names_the_archives_the_release_publishes() {
    let cargo = toml_file("Cargo.toml");
    let package = &cargo["package"];
    let repository = package["repository"].as_str().unwrap();
    let binstall = &package["metadata"]["binstall"];
    assert_eq!(binstall["pkg-fmt"].as_str(), Some("tgz"));
    assert_eq!(
        binstall["bin-dir"].as_str(),
        Some("{ bin }{ binary-ext }"),
        "the archive holds the binary at its root"
    );
    let version = env!("CARGO_PKG_VERSION");
    for (target, ..) in TARGETS {
        let url = binstall["pkg-url"]
            .as_str()
            .unwrap()
            .replace("{ repo }", repository)
            .replace("{ version }", version)
            .replace("{ name }", env!("CARGO_PKG_NAME"))
            .replace("{ target }", target);
        assert_eq!(
            url,
            format!("{repository}/releases/download/v{version}/cargo-onnx-lint-{target}.tar.gz")
        );
    }
    // The README's `rev:` and `@v` name the tag of this version.
    let readme = std::fs::read_to_string(support::repo().join("README.md")).unwrap();
    assert!(readme.contains(&format!("rev: v{version}")));
    assert!(readme.contains(&format!("cargo-onnx-lint/cargo-onnx-lint@v{version}")));
    assert!(repository.ends_with("/cargo-onnx-lint/cargo-onnx-lint"));
}

/// Replaces `${{ inputs.NAME }}` and `${{ steps.ID.outputs.NAME }}` as the runner would.
fn expand(text: &str, vars: &BTreeMap<String, String>) -> String {
    let re = regex::Regex::new(r"\$\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}").unwrap();
    re.replace_all(text, |c: &regex::Captures| {
        vars.get(&c[1]).cloned().unwrap_or_default()
    })
    .into_owned()
}

/// A runner for action.yml's `setup` and `install` steps.
struct Action {
    steps: Vec<Value>,
    dir: tempfile::TempDir,
    /// `ONNX_LINT_RELEASES_URL`: a folder laid out as GitHub's release downloads.
    releases: PathBuf,
    /// A `cargo` on PATH that records its arguments instead of building.
    cargo_calls: PathBuf,
    path: String,
}

impl Action {
    fn new() -> Action {
        let action = yaml("action.yml");
        let steps = action["runs"]["steps"].as_array().unwrap().clone();
        let dir = tempfile::tempdir().unwrap();
        let releases = dir.path().join("releases");
        let fake = dir.path().join("fakebin");
        std::fs::create_dir_all(&fake).unwrap();
        let cargo_calls = dir.path().join("cargo-calls");
        let script = format!(
            "#!/usr/bin/env bash\necho \"$*\" >> '{}'\n",
            cargo_calls.display()
        );
        std::fs::write(fake.join("cargo"), script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(fake.join("cargo"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let mut paths = vec![fake];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(paths).unwrap().into_string().unwrap();
        Action {
            steps,
            dir,
            releases,
            cargo_calls,
            path,
        }
    }

    fn step(&self, id: &str) -> &Value {
        self.steps.iter().find(|s| s["id"] == id).unwrap()
    }

    /// Runs step `id` on a runner of `os`/`arch` whose tool cache is `cache`; `vars` holds the
    /// inputs and the outputs of earlier steps, and gets this step's.
    fn run_step(
        &self,
        id: &str,
        (os, arch): (&str, &str),
        cache: &Path,
        vars: &mut BTreeMap<String, String>,
    ) -> Run {
        let step = self.step(id);
        let script = step["run"].as_str().unwrap();
        assert!(!script.contains("${{"), "inputs reach scripts through env");
        let gh_output = cache.join(format!("output-{id}"));
        std::fs::write(&gh_output, "").unwrap();
        let mut env: BTreeMap<String, String> = step["env"]
            .as_object()
            .map(|e| {
                e.iter()
                    .map(|(k, v)| (k.clone(), expand(v.as_str().unwrap(), vars)))
                    .collect()
            })
            .unwrap_or_default();
        for (k, v) in [
            ("GITHUB_ACTION_PATH", support::repo().display().to_string()),
            ("GITHUB_OUTPUT", gh_output.display().to_string()),
            ("RUNNER_TOOL_CACHE", cache.display().to_string()),
            ("RUNNER_OS", os.to_string()),
            ("RUNNER_ARCH", arch.to_string()),
            ("PATH", self.path.clone()),
            (
                "ONNX_LINT_RELEASES_URL",
                format!("file://{}", self.releases.display()),
            ),
        ] {
            env.insert(k.to_string(), v);
        }
        let out = bash(script, self.dir.path(), &env);
        let produced = std::fs::read_to_string(&gh_output).unwrap();
        for (k, v) in produced.lines().filter_map(|l| l.split_once('=')) {
            vars.insert(format!("steps.{id}.outputs.{k}"), v.to_string());
        }
        out
    }

    /// Runs `setup` then, as on a cache miss, `install`, with an empty tool cache of its own;
    /// returns the install step's run and every output.
    fn install(&self, os: &str, arch: &str, version: &str) -> (Run, BTreeMap<String, String>) {
        let cache = tempfile::tempdir_in(self.dir.path()).unwrap().keep();
        let mut vars = BTreeMap::from([("inputs.version".to_string(), version.to_string())]);
        let setup = self.run_step("setup", (os, arch), &cache, &mut vars);
        assert_eq!(setup.code, 0, "setup: {}", setup.stderr);
        let install = self.run_step("install", (os, arch), &cache, &mut vars);
        (install, vars)
    }

    fn cargo_calls(&self) -> String {
        let calls = std::fs::read_to_string(&self.cargo_calls).unwrap_or_default();
        let _ = std::fs::remove_file(&self.cargo_calls);
        calls
    }
}

/// The Action's runner-to-target mapping is the release's list of targets, and its download
/// address is the release of the tag in the repository of Cargo.toml.
#[test]
fn action_knows_the_targets_the_release_publishes() {
    let action = Action::new();
    let version = env!("CARGO_PKG_VERSION");
    let repository = toml_file("Cargo.toml")["package"]["repository"]
        .as_str()
        .unwrap()
        .to_string();
    for (target, _, os, arch) in TARGETS {
        let setup = action.step("setup")["run"].as_str().unwrap();
        let gh = action.dir.path().join(format!("setup-{target}"));
        std::fs::write(&gh, "").unwrap();
        let env = BTreeMap::from([
            (
                "GITHUB_ACTION_PATH".to_string(),
                support::repo().display().to_string(),
            ),
            ("GITHUB_OUTPUT".to_string(), gh.display().to_string()),
            ("INPUT_VERSION".to_string(), String::new()),
            ("RUNNER_OS".to_string(), os.to_string()),
            ("RUNNER_ARCH".to_string(), arch.to_string()),
        ]);
        let out = bash(setup, action.dir.path(), &env);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let outputs = std::fs::read_to_string(&gh).unwrap();
        assert!(
            outputs.lines().any(|l| l == format!("target={target}")),
            "{os} {arch}: {outputs}"
        );
        assert!(
            outputs
                .lines()
                .any(|l| l == format!("release={repository}/releases/download/v{version}")),
            "{outputs}"
        );
    }
}

/// The release workflow's archive step makes the asset; published as GitHub serves it, the
/// Action's install step takes it (no build) when it was built from the action's sources or
/// the version is asked for, and builds with cargo otherwise.
#[test]
fn action_installs_the_release_binary_and_falls_back_to_building() {
    let action = Action::new();
    let version = env!("CARGO_PKG_VERSION");
    let target = "x86_64-unknown-linux-gnu";

    // The release workflow's archive step, on a checkout whose build made the binary.
    let wf = yaml(".github/workflows/release.yml");
    let checkout = action.dir.path().join("checkout");
    let built = checkout.join(format!("target/{target}/release"));
    std::fs::create_dir_all(&built).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_cargo-onnx-lint"),
        built.join("cargo-onnx-lint"),
    )
    .unwrap();
    let archive = step(&wf["jobs"]["binaries"], "archive");
    let env = BTreeMap::from([("TARGET".to_string(), target.to_string())]);
    let out = bash(archive["run"].as_str().unwrap(), &checkout, &env);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let asset = format!("cargo-onnx-lint-{target}.tar.gz");
    let release = action.releases.join(format!("v{version}"));
    std::fs::create_dir_all(&release).unwrap();
    for name in [asset.clone(), format!("{asset}.sha256")] {
        std::fs::copy(checkout.join("dist").join(&name), release.join(&name))
            .unwrap_or_else(|e| panic!("the archive step makes dist/{name}: {e}"));
    }
    // The check job's `sources.sha256`.
    let digest = run({
        let mut c = Command::new("bash");
        c.arg(support::repo().join(".github/source-digest.sh"))
            .arg(support::repo());
        c
    });
    assert_eq!(digest.code, 0, "{}", digest.stderr);
    assert_eq!(digest.stdout.trim().len(), 16);
    std::fs::write(release.join("sources.sha256"), &digest.stdout).unwrap();

    // Built from the action's sources: the prebuilt binary, no cargo.
    let (out, setup) = action.install("Linux", "X64", "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("the release's prebuilt binary"),
        "{}",
        out.stdout
    );
    assert_eq!(action.cargo_calls(), "");
    let bin = PathBuf::from(&setup["steps.setup.outputs.bin"]);
    let mut cmd = Command::new(&bin);
    cmd.arg("--version");
    let version_out = run(cmd);
    assert_eq!(version_out.code, 0);
    assert!(
        version_out.stdout.contains(version),
        "{}",
        version_out.stdout
    );

    // Another checkout than the release was built from: build it.
    std::fs::write(release.join("sources.sha256"), "0123456789abcdef\n").unwrap();
    let (out, setup) = action.install("Linux", "X64", "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("other sources than this checkout"));
    assert_eq!(
        action.cargo_calls().trim(),
        format!(
            "install --locked --root {} --path {}",
            setup["steps.setup.outputs.root"],
            support::repo().display()
        )
    );

    // The version asked for: its binary, whatever the action's checkout.
    let (out, _) = action.install("Linux", "X64", version);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("the release's prebuilt binary"));
    assert_eq!(action.cargo_calls(), "");

    // A runner with no prebuilt binary, and a version with no release: build the tag.
    let (out, setup) = action.install("Linux", "RISCV64", version);
    assert!(out.stdout.contains("no prebuilt binary for Linux RISCV64"));
    let repo_url = &setup["steps.setup.outputs.repo"];
    assert_eq!(
        action.cargo_calls().trim(),
        format!(
            "install --locked --root {} --git {repo_url} --tag v{version} cargo-onnx-lint",
            setup["steps.setup.outputs.root"]
        )
    );
    let (out, _) = action.install("Linux", "X64", "999.0.0");
    assert!(out.stdout.contains("no published release v999.0.0"));
    assert!(action.cargo_calls().contains("--tag v999.0.0"));

    // A damaged download is never installed.
    std::fs::write(release.join(&asset), b"not the archive").unwrap();
    let (out, setup) = action.install("Linux", "X64", version);
    assert!(
        out.stdout.contains("does not match its .sha256"),
        "{}",
        out.stdout
    );
    assert!(action.cargo_calls().contains("install --locked"));
    assert!(!Path::new(&setup["steps.setup.outputs.bin"]).exists());
}

#[test]
fn pre_commit_hooks_build_with_cargo_install_with_pip_or_use_the_path() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hooks = hooks.as_array().unwrap();
    let by_id = |id: &str| {
        hooks
            .iter()
            .find(|h| h["id"] == id)
            .unwrap_or_else(|| panic!("no hook {id}"))
    };
    let base = by_id("onnx-lint");
    assert_eq!(base["language"], "rust");
    assert_eq!(by_id("onnx-lint-system")["language"], "system");
    let pip = by_id("onnx-lint-pip");
    assert_eq!(
        pip["language"], "python",
        "pip-installs pyproject.toml's wheel"
    );
    for key in ["entry", "files", "types", "pass_filenames"] {
        assert_eq!(pip[key], base[key], "{key}");
    }
    // The wheel's script is the binary the hook's entry names.
    assert_eq!(pip["entry"], env!("CARGO_PKG_NAME"));
}
