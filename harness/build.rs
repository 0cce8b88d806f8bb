//! The corpus is built into the binary (src/case/corpus.rs): any change under spec-cases/ must rebuild
//! it, new files included, which `include_dir!` alone does not track on stable Rust.

fn main() {
    println!("cargo:rerun-if-changed=../spec-cases");
}
