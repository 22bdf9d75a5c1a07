//! Compiles the subset of Perfetto's trace proto that `enginetop export --to perfetto`
//! writes (`proto/perfetto_trace_subset.proto`) into Rust types with prost-build, using the
//! protoc that protoc-bin-vendored ships, so no system protoc is needed.

fn main() -> std::io::Result<()> {
    let proto = "proto/perfetto_trace_subset.proto";
    println!("cargo:rerun-if-changed={proto}");
    println!("cargo:rerun-if-changed=build.rs");
    let protoc = protoc_bin_vendored::protoc_bin_path().map_err(std::io::Error::other)?;
    prost_build::Config::new()
        .protoc_executable(protoc)
        .compile_protos(&[proto], &["proto"])
}
