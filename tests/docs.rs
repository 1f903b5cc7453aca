//! The builder docs held to the code: every path docs/code-layout.md and docs/building.md give
//! exists, and every module of src/ (and of the driver package), of python/ and every script of
//! scripts/ is named in code-layout.md, in the section of its folder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folders and files at the repository's root that a backticked path may start with.
const TOP: [&str; 10] = [
    "src/",
    "python/",
    "tests/",
    "scripts/",
    "configs/",
    "docs/",
    "benches/",
    "datasets/",
    "Makefile",
    "Cargo.toml",
];

/// The backticked texts of `doc` that are paths in the repository.
fn paths_in(doc: &str) -> Vec<String> {
    doc.split('`')
        .skip(1)
        .step_by(2)
        .filter(|text| !text.contains(char::is_whitespace) && !text.contains('…'))
        .filter(|text| TOP.iter().any(|top| text.starts_with(top)))
        .map(|text| text.trim_end_matches(['.', ',', ':']).to_string())
        .collect()
}

/// Every module file under `dir` (`.rs`, `.py` and `.pyi`; under scripts/, every script),
/// relative to the repository's root.
fn modules_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "__pycache__") {
                modules_under(&path, found);
            }
        } else if path.file_name().is_some_and(|name| name == "tests.rs") {
            // A module's unit tests, part of the module they test.
        } else if path
            .extension()
            .is_some_and(|e| ["rs", "py", "pyi", "sh"].contains(&e.to_str().unwrap_or_default()))
        {
            found.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
}

/// The section of code-layout.md for the top folder of `module` (`### \`src/loader/\``,
/// `### \`python/\``, `### \`scripts/\``), or the whole page for a file directly in src/.
fn section_of<'a>(doc: &'a str, module: &Path) -> &'a str {
    let mut parts = module.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let (first, top) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let heading = match first.as_str() {
        "src" if top.ends_with(".rs") => None,
        "src" => Some(format!("### `src/{top}/`")),
        other => Some(format!("### `{other}/`")),
    };
    if let Some(heading) = heading {
        if let Some(start) = doc.find(&heading) {
            let rest = &doc[start + heading.len()..];
            return &rest[..rest.find("\n### ").unwrap_or(rest.len())];
        }
    }
    doc
}

/// The name a module goes by: its file's stem, its folder's for a `mod.rs` or `__init__.py`; a
/// script's whole file name.
fn name_of(module: &Path) -> String {
    if module.starts_with("scripts") {
        return module.file_name().unwrap().to_string_lossy().into_owned();
    }
    let stem = module.file_stem().unwrap().to_string_lossy();
    match stem.as_ref() {
        "mod" | "__init__" => module.parent().unwrap().file_name().unwrap().to_string_lossy(),
        _ => stem,
    }
    .into_owned()
}

/// Whether `name` is a word of `text` (not part of a longer identifier).
fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The modules `doc` does not name in their folder's section (a top folder's own `mod.rs` is
/// named by the section's heading).
fn unnamed(doc: &str, modules: &[PathBuf]) -> Vec<String> {
    let named = |module: &Path| {
        let name = name_of(module);
        names(section_of(doc, module), &name) || doc.contains(&format!("### `src/{name}/`"))
    };
    modules
        .iter()
        .filter(|module| !named(module))
        .map(|module| module.display().to_string())
        .collect()
}

#[test]
fn every_path_the_builder_docs_give_exists() {
    let mut missing = BTreeSet::new();
    for page in ["docs/code-layout.md", "docs/building.md"] {
        let doc = std::fs::read_to_string(root().join(page)).unwrap();
        let paths = paths_in(&doc);
        assert!(paths.len() >= 5, "{page}: too few paths found to check ({paths:?})");
        for path in paths {
            if !root().join(&path).exists() {
                missing.insert(format!("{page}: `{path}`"));
            }
        }
    }
    assert!(missing.is_empty(), "paths the docs give that do not exist: {missing:#?}");
}

#[test]
fn every_module_is_named_in_the_code_layout() {
    let doc = std::fs::read_to_string(root().join("docs/code-layout.md")).unwrap();
    let mut modules = Vec::new();
    for dir in ["src", "python", "scripts"] {
        modules_under(&root().join(dir), &mut modules);
    }
    assert!(modules.len() > 100, "{} modules found", modules.len());
    assert!(modules.iter().any(|m| m.starts_with("scripts")), "scripts are held to it");
    assert!(modules.iter().any(|m| m.starts_with("python")), "python/ is held to it");
    let unnamed_now = unnamed(&doc, &modules);
    assert!(
        unnamed_now.is_empty(),
        "modules docs/code-layout.md does not name in their folder's section: {unnamed_now:#?}"
    );
    // A module added without its line is found, by its name and in its own folder's section.
    modules.push(PathBuf::from("src/loader/lerobot/a_module_nobody_wrote_up.rs"));
    modules.push(PathBuf::from("src/timing/bridge.rs"));
    modules.push(PathBuf::from("scripts/remote-figure-v2.sh"));
    modules.push(PathBuf::from("python/feedbench/streaming.py"));
    let found = unnamed(&doc, &modules);
    assert_eq!(
        found,
        [
            "src/loader/lerobot/a_module_nobody_wrote_up.rs",
            "src/timing/bridge.rs",
            "scripts/remote-figure-v2.sh",
            "python/feedbench/streaming.py"
        ],
        "a module without its line"
    );
}
