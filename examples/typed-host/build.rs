//! Typed bindings from `host.json`: an invalid config fails the build with every diagnostic.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    brain_codegen::compile_config("host.json")?;
    Ok(())
}
