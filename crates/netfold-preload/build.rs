//! Switches on the interposer module of the shared sources (`netfold_preload`, see Cargo.toml).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(netfold_preload)");
    println!("cargo::rustc-cfg=netfold_preload");
}
