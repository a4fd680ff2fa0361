//! `bindings/host.json` satisfies both contracts: brain-config's rules, and the committed JSON
//! Schema it names in `"$schema"` (what an editor checks while someone types).

use serde_json::Value;
use tests::workspace_root;

#[test]
fn deployment_config_passes_the_rules_and_its_json_schema() {
    let path = workspace_root().join("bindings/host.json");
    let config = brain_config::load_file(&path).unwrap_or_else(|error| panic!("{error}"));
    assert!(!config.tools.is_empty());

    let schema_ref = config
        .schema
        .expect("bindings/host.json names its JSON Schema");
    let schema_path = path.parent().unwrap().join(schema_ref);
    let schema: Value = serde_json::from_slice(&std::fs::read(&schema_path).unwrap()).unwrap();
    let instance: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let validator = brain_config::compile_schema(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
