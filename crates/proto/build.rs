use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A vendored protoc keeps the build free of system packages.
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment concurrently.
    unsafe { std::env::set_var("PROTOC", protoc) };

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "dialectic/v1/gateway.proto",
        "dialectic/v1/queue.proto",
        "dialectic/v1/wallet.proto",
        "dialectic/v1/indexer.proto",
        "dialectic/v1/planner.proto",
        "dialectic/v1/renderer.proto",
        "dialectic/v1/executor.proto",
    ];
    let paths: Vec<PathBuf> = files.iter().map(|f| root.join(f)).collect();
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("dialectic_descriptor.bin"))
        .compile_protos(&paths, std::slice::from_ref(&root))?;
    // Relative to the package root, not absolute: two checkouts whose target
    // dirs were copied from one another share this unit, and absolute paths
    // would make each watch the other's protos and keep stale generated code.
    for file in files {
        println!("cargo:rerun-if-changed=../../proto/{file}");
    }
    Ok(())
}
