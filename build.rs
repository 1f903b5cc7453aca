//! Links libtorch so that every binary, test and bench finds it without `LD_LIBRARY_PATH`.
//!
//! torch-sys exports the libtorch library directory as `DEP_TCH_LIBTORCH_LIB`; we link `torch`
//! with `--no-as-needed` (otherwise the CUDA part is dropped from the link) and add an rpath.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={lib_dir}");
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-L{lib_dir}");
        println!("cargo:rustc-link-arg=-ltorch");
    }
}
