//! The layout docs/design.md promises, checked from the code itself.
//!
//! - **No import cycle.** In either crate, among the modules of every folder
//!   (the crate root's top-level modules, a folder's files), no module
//!   reaches, through its `use` lines and paths, a sibling that reaches it
//!   back. A file may lean on its parent (`super::`, the nouns a `mod.rs`
//!   shares); the parent is not one of the siblings.
//! - **No layer reaches up.** The top-level modules of each crate appear in
//!   docs/design.md's map from the bottom up; a module uses only those
//!   listed before it.
//! - **The map is whole.** Every source file under `encoder/src` and
//!   `server/src` is in the map, and every file the map names exists.
//!
//! References are read from the source: `use` trees (`crate::`, `super::`,
//! `self::` or a child module's name first) and `crate::`, `super::` and
//! `self::` paths, with comments, string literals and `#[cfg(test)]`
//! modules left out. A name a module imports or re-exports
//! (`pub use child::Name`) resolves to the module it comes from, so a
//! path through a `mod.rs`'s re-export counts as a reference to the file
//! that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["net", "tls", "files"]`; the crate
/// root is empty.
type ModPath = Vec<String>;

/// One crate's modules and what each references.
struct Crate {
    /// Every module with a file of its own, and the file.
    files: BTreeMap<ModPath, PathBuf>,
    /// Per module, the names its `use` lines bring in, and the full path
    /// each stands for (its first segment `crate`).
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// Per module file, the modules its references resolve to.
    references: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, relative to the repository.
fn sources(dir: &str) -> Vec<PathBuf> {
    fn walk(at: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), &mut out);
    out.iter()
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect()
}

/// The module a file is, within its crate (`None` for `main.rs`, a crate
/// of its own).
fn module_of(src: &str, file: &Path) -> Option<ModPath> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" if parts.is_empty() => {}
        "main.rs" if parts.is_empty() => return None,
        "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_string()),
    }
    Some(parts)
}

/// `source` with comments and the contents of string and character
/// literals blanked (newlines kept), so that what is left is code.
fn code_only(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(b[i]));
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string: r"…", r#"…"#.
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                out.extend(std::iter::repeat_n(b' ', hashes + 2));
                i += hashes + 2;
                while i < b.len() && !b[i..].starts_with(&close) {
                    out.push(blank(b[i]));
                    i += 1;
                }
                out.extend(std::iter::repeat_n(b' ', close.len()));
                i += close.len();
            }
            b'"' => {
                out.push(b' ');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        out.push(b' ');
                        i += 1;
                    }
                    if i < b.len() {
                        out.push(blank(b[i]));
                        i += 1;
                    }
                }
                out.push(b' ');
                i += 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{7f}'), or a lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 2 + p)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        out.extend(std::iter::repeat_n(b' ', end + 1 - i));
                        i = end + 1;
                    }
                    None => {
                        out.push(b'\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the item at `start` (`mod x`, after any `pub`) is under
/// `#[cfg(test)]`, among the attributes right before it.
fn under_cfg_test(code: &str, start: usize) -> bool {
    let mut before = code[..start].trim_end();
    for vis in ["pub(crate)", "pub(super)", "pub"] {
        if let Some(rest) = before.strip_suffix(vis) {
            before = rest.trim_end();
            break;
        }
    }
    while before.ends_with(']') {
        let Some(open) = before.rfind("#[") else {
            return false;
        };
        let attr: String = before[open..].split_whitespace().collect();
        if attr == "#[cfg(test)]" {
            return true;
        }
        before = before[..open].trim_end();
    }
    false
}

/// The modules a file declares (`mod x;`, `mod tests { … }`): each one's
/// name, the byte range of its body if it is inline, and whether it is
/// under `#[cfg(test)]`.
fn declared_modules(code: &str) -> Vec<(String, Option<std::ops::Range<usize>>, bool)> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(p) = code[at..].find("mod ") {
        let start = at + p;
        at = start + 4;
        if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
            continue;
        }
        let rest = &code[start + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        let test = under_cfg_test(code, start);
        if !name.is_empty() && after.starts_with(';') {
            found.push((name, None, test));
            continue;
        }
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = start + 4 + name.len() + rest[name.len()..].find('{').unwrap();
        let mut depth = 0;
        for (i, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        found.push((name.clone(), Some(open..i), test));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The inline modules of a file (`mod tests { … }`): each one's name, the
/// byte range of its body, and whether it is under `#[cfg(test)]`.
fn inline_modules(code: &str) -> Vec<(String, std::ops::Range<usize>, bool)> {
    declared_modules(code)
        .into_iter()
        .filter_map(|(name, body, test)| Some((name, body?, test)))
        .collect()
}

/// The paths a `use` tree stands for: `a::{b, c::{d, self}}` gives
/// `a::b`, `a::c::d`, `a::c`. A renaming (`as x`) keeps the path, named
/// by the new name (the last element of the pair).
fn expand_use(tree: &str) -> Vec<(Vec<String>, String)> {
    fn parse(s: &str, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if let Some(open) = s.find('{') {
            let head: Vec<String> = s[..open]
                .split("::")
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect();
            let inner = &s[open + 1..s.rfind('}').unwrap()];
            let mut path = prefix.to_vec();
            path.extend(head);
            let mut depth = 0;
            let mut last = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parse(&inner[last..i], &path, out);
                        last = i + 1;
                    }
                    _ => {}
                }
            }
            parse(&inner[last..], &path, out);
            return;
        }
        let (path, rename) = match s.split_once(" as ") {
            Some((p, r)) => (p, Some(r.trim())),
            None => (s, None),
        };
        let mut full = prefix.to_vec();
        for part in path.split("::").map(str::trim) {
            if part == "self" && !full.is_empty() {
                continue;
            }
            full.push(part.to_string());
        }
        let name = rename.unwrap_or_else(|| full.last().unwrap()).to_string();
        out.push((full, name));
    }
    let mut out = Vec::new();
    parse(tree, &[], &mut out);
    out
}

/// `path`, relative to the module `base`, from the crate root:
/// `super::x` in `a::b` is `crate::a::x`. `None` for a path into another
/// crate.
fn absolute(path: &[String], base: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String> = base.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate" | "$crate") => {
            at.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                at.pop();
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut full = vec!["crate".to_string()];
    full.extend(at);
    full.extend(rest.iter().cloned());
    Some(full)
}

impl Crate {
    /// The crate whose sources are under `src` (`server/src`).
    fn read(src: &str) -> Crate {
        let mut files = BTreeMap::new();
        for file in sources(src) {
            if let Some(module) = module_of(src, &file) {
                let text = fs::read_to_string(root().join(&file)).unwrap();
                files.insert(module, (file, text));
            }
        }
        Crate::from_sources(files)
    }

    /// The crate made of these modules, each with its file and its text.
    fn from_sources(sources: BTreeMap<ModPath, (PathBuf, String)>) -> Crate {
        let mut krate = Crate {
            files: sources
                .iter()
                .map(|(m, (file, _))| (m.clone(), file.clone()))
                .collect(),
            imports: BTreeMap::new(),
            references: BTreeMap::new(),
        };
        // Each file's code, its inline modules, and every path it writes,
        // with the module it is written in.
        let mut written: Vec<(ModPath, Vec<String>)> = Vec::new();
        // Test code is left out: a module's tests may drive it through the
        // crate's whole API (`crate::write` from a lower layer's tests),
        // which is no dependency of the code that ships.
        let test_files: Vec<ModPath> = sources
            .iter()
            .flat_map(|(module, (_, text))| {
                declared_modules(&code_only(text))
                    .into_iter()
                    .filter(|(_, body, test)| body.is_none() && *test)
                    .map(move |(name, _, _)| {
                        let mut m = module.clone();
                        m.push(name);
                        m
                    })
            })
            .collect();
        for (module, (_, text)) in &sources {
            if test_files.iter().any(|t| module.starts_with(t)) {
                continue;
            }
            let module = module.clone();
            let code = code_only(text);
            let inline = inline_modules(&code);
            let in_test = |offset: usize| {
                inline
                    .iter()
                    .any(|(_, range, test)| *test && range.contains(&offset))
            };
            let base_at = |offset: usize| {
                let mut base = module.clone();
                for (name, range, _) in &inline {
                    if range.contains(&offset) {
                        base.push(name.clone());
                    }
                }
                base
            };
            let mut at = 0;
            while let Some(p) = code[at..].find("use ") {
                let start = at + p;
                at = start + 4;
                let b = code.as_bytes();
                if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_')
                    || in_test(start)
                {
                    continue;
                }
                let Some(end) = code[start..].find(';') else {
                    continue;
                };
                let tree = &code[start + 4..start + end];
                let base = base_at(start);
                for (mut path, name) in expand_use(tree) {
                    // `use child::Name` (a path relative to this module,
                    // as in `pub use connection::READ_CHUNK`) is
                    // `self::child::Name`.
                    let mut child = base.clone();
                    child.extend(path.first().cloned());
                    if krate.files.contains_key(&child) {
                        path.insert(0, "self".to_string());
                    }
                    let Some(full) = absolute(&path, &base) else {
                        continue;
                    };
                    if base.len() == module.len() {
                        krate
                            .imports
                            .entry(module.clone())
                            .or_default()
                            .insert(name, full.clone());
                    }
                    written.push((module.clone(), full));
                }
            }
            // Paths in code: `crate::a::b`, `super::x`, `self::y`.
            let b = code.as_bytes();
            for word in ["$crate::", "crate::", "super::", "self::"] {
                let mut at = 0;
                while let Some(p) = code[at..].find(word) {
                    let start = at + p;
                    at = start + word.len();
                    if start > 0
                        && (b[start - 1].is_ascii_alphanumeric()
                            || b[start - 1] == b'_'
                            || b[start - 1] == b'$'
                            || (b[start - 1] == b':' && word != "$crate::"))
                        || in_test(start)
                    {
                        continue;
                    }
                    let path: Vec<String> = code[start..]
                        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '$'))
                        .next()
                        .unwrap()
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect();
                    if let Some(full) = absolute(&path, &base_at(start)) {
                        written.push((module.clone(), full));
                    }
                }
            }
        }
        for (module, full) in written {
            let target = krate.resolve(&full, 0);
            krate.references.entry(module).or_default().insert(target);
        }
        krate
    }

    /// The module a path from the crate root (`crate::a::b::Name`) lands
    /// in: through child modules, and through the names a module imports.
    fn resolve(&self, full: &[String], depth: usize) -> ModPath {
        let mut at: ModPath = Vec::new();
        for seg in &full[1..] {
            let mut child = at.clone();
            child.push(seg.clone());
            if self.files.contains_key(&child) {
                at = child;
                continue;
            }
            if depth < 16 {
                if let Some(target) = self.imports.get(&at).and_then(|m| m.get(seg)) {
                    if target.first().map(String::as_str) == Some("crate") && target != full {
                        return self.resolve(target, depth + 1);
                    }
                }
            }
            break;
        }
        at
    }

    /// Among the modules directly under `parent`, which reaches which:
    /// every reference from a module's subtree into a sibling's subtree.
    fn sibling_edges(&self, parent: &[String]) -> BTreeMap<String, BTreeSet<String>> {
        let child_of = |m: &ModPath| -> Option<String> {
            (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone())
        };
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, targets) in &self.references {
            let Some(a) = child_of(from) else { continue };
            edges.entry(a.clone()).or_default();
            for to in targets {
                if let Some(b) = child_of(to) {
                    if a != b {
                        edges.entry(a.clone()).or_default().insert(b);
                    }
                }
            }
        }
        edges
    }

    /// The folders of the crate: every module with children.
    fn parents(&self) -> BTreeSet<ModPath> {
        self.files
            .keys()
            .filter(|m| !m.is_empty())
            .map(|m| m[..m.len() - 1].to_vec())
            .collect()
    }
}

/// A cycle in `edges`, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == m).unwrap();
                    let mut found = stack[from..].to_vec();
                    found.push(m.clone());
                    return Some(found);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if !state.contains_key(n.as_str()) {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The files docs/design.md's map lists, in order: each entry of the code
/// block under "## The map" begins a line with its path.
fn map_entries() -> Vec<PathBuf> {
    let design = fs::read_to_string(root().join("docs/design.md")).unwrap();
    let section = design
        .split("\n## ")
        .find(|s| s.starts_with("The map"))
        .expect("docs/design.md has a section \"The map\"");
    let block = section
        .split("```")
        .nth(1)
        .expect("the map is a code block");
    block
        .lines()
        .filter(|l| l.starts_with("encoder/") || l.starts_with("server/"))
        .map(|l| PathBuf::from(l.split_whitespace().next().unwrap()))
        .collect()
}

#[test]
fn no_module_reaches_a_sibling_that_reaches_it_back() {
    for src in ["encoder/src", "server/src"] {
        let krate = Crate::read(src);
        for parent in krate.parents() {
            let edges = krate.sibling_edges(&parent);
            if let Some(c) = cycle(&edges) {
                panic!(
                    "{src}: an import cycle among the modules of {}: {}",
                    if parent.is_empty() {
                        "the crate root".to_string()
                    } else {
                        parent.join("/")
                    },
                    c.join(" → ")
                );
            }
        }
    }
}

#[test]
fn no_layer_uses_one_listed_after_it_in_the_map() {
    let listed = map_entries();
    for src in ["encoder/src", "server/src"] {
        let krate = Crate::read(src);
        // The top-level modules in the order the map lists them.
        let mut order: Vec<String> = Vec::new();
        for file in &listed {
            let Ok(rel) = file.strip_prefix(src) else {
                continue;
            };
            let Some(module) = module_of(src, &Path::new(src).join(rel)) else {
                continue;
            };
            if let Some(top) = module.first() {
                if !order.contains(top) {
                    order.push(top.clone());
                }
            }
        }
        let rank = |m: &str| order.iter().position(|o| o == m);
        let edges = krate.sibling_edges(&[]);
        for (from, tos) in &edges {
            let from_rank = rank(from).unwrap_or_else(|| panic!("{src}: {from} is not in the map"));
            for to in tos {
                let to_rank = rank(to).unwrap_or_else(|| panic!("{src}: {to} is not in the map"));
                assert!(
                    to_rank < from_rank,
                    "{src}: {from} uses {to}, which the map lists above it (the map goes from the bottom layer up: {})",
                    order.join(" → ")
                );
            }
        }
    }
}

/// The server's core: the protocol and IO, which serve any `Service`.
const CORE: [&str; 10] = [
    "clock", "units", "log", "memory", "h1", "response", "service", "session", "net", "observe",
];

/// The core names nothing of the demo: no module of it uses `demo` (or the
/// `site` it once was), so that anyone's service runs on it (and the demo
/// reaches the core only through the library's public API, as any
/// application does).
#[test]
fn the_core_names_nothing_of_the_demo() {
    let krate = Crate::read("server/src");
    let edges = krate.sibling_edges(&[]);
    for core in CORE {
        assert!(
            edges.contains_key(core) || krate.files.contains_key(&vec![core.to_string()]),
            "server/src: no module {core}"
        );
        if let Some(uses) = edges.get(core) {
            assert!(
                !uses.contains("site") && !uses.contains("demo"),
                "server/src: the core's {core} uses the demo: {uses:?}"
            );
        }
    }
}

/// The demo's own names, as its code spells them: its module (and the
/// `site` it once was), its service, its routes' limits and text, and the
/// list that once filtered its options out of an application's command
/// line. (Its `Settings` and `Options` are names any application may use.)
const DEMO_NAMES: [&str; 6] = [
    "demo",
    "site",
    "Site",
    "RouteLimits",
    "routes_text",
    "DEMO_OPTIONS",
];

/// Whether `code` has `word` as a whole identifier.
fn has_word(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The library is an application's core and nothing more: no file of it
/// (server/src but the binary's `main.rs` and `demo/`) names the demo in
/// its code — comments and strings aside — nor gates code on the binary's
/// `demo` feature. The demo is the binary's own code on the public API.
#[test]
fn the_library_declares_and_names_no_demo() {
    let demo = Path::new("server/src/demo");
    let mut named = Vec::new();
    for file in sources("server/src") {
        if file.starts_with(demo) || file == Path::new("server/src/main.rs") {
            continue;
        }
        let text = fs::read_to_string(root().join(&file)).unwrap();
        let code = code_only(&text);
        for word in DEMO_NAMES {
            if has_word(&code, word) {
                named.push(format!("{}: {word}", file.display()));
            }
        }
        if text.contains("feature = \"demo\"") {
            named.push(format!("{}: the demo feature", file.display()));
        }
    }
    assert!(
        named.is_empty(),
        "the library names the demo: {}",
        named.join(", ")
    );
    assert!(has_word("mod demo;", "demo") && !has_word("demos", "demo"));
}

/// The session meets the application in one file: outside
/// `session/dispatch.rs`, no file of `session/` calls the service, its
/// observer or a reply (framing, refusals and memory never name them).
/// A textual check: it finds the protocol's `.service.` and `.observer.`
/// fields, and a reply's methods called on a binding named `reply`, as
/// the session names them.
#[test]
fn the_session_calls_the_application_only_from_dispatch() {
    let calls = [
        ".service.",
        ".observer.",
        "reply.held(",
        "reply.refuses(",
        "reply.wants_body(",
        "reply.streams_body(",
        "reply.body_chunk(",
        "reply.prepare(",
        "reply.respond(",
        "reply.poll_chunk(",
    ];
    let dir = root().join("server/src/session");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if path.file_name().unwrap() == "dispatch.rs" {
            seen = calls.iter().filter(|c| text.contains(*c)).count();
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if let Some(call) = calls.iter().find(|c| code.contains(*c)) {
                panic!(
                    "{}:{}: calls the application ({call}) outside dispatch.rs: {}",
                    path.display(),
                    n + 1,
                    line.trim()
                );
            }
        }
    }
    // The check looks for what dispatch.rs does write.
    assert_eq!(seen, calls.len(), "dispatch.rs makes each call");
}

#[test]
fn every_source_file_is_in_the_map_and_every_entry_exists() {
    let listed: BTreeSet<PathBuf> = map_entries().into_iter().collect();
    let mut missing = Vec::new();
    for src in ["encoder/src", "server/src"] {
        for file in sources(src) {
            if !listed.contains(&file) {
                missing.push(file.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/design.md's map lacks: {}",
        missing.join(", ")
    );
    let stale: Vec<String> = listed
        .iter()
        .filter(|f| !root().join(f).is_file())
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        stale.is_empty(),
        "docs/design.md's map names files that do not exist: {}",
        stale.join(", ")
    );
}

#[test]
fn the_reader_resolves_paths_and_re_exports() {
    // The pieces the checks stand on, on a small input.
    assert_eq!(
        expand_use("crate::a::{b, c::{self, D as E}}"),
        vec![
            (vec!["crate".into(), "a".into(), "b".into()], "b".into()),
            (vec!["crate".into(), "a".into(), "c".into()], "c".into()),
            (
                vec!["crate".into(), "a".into(), "c".into(), "D".into()],
                "E".into()
            ),
        ]
    );
    assert_eq!(
        absolute(&["super".into(), "x".into()], &["a".into(), "b".into()]),
        Some(vec!["crate".into(), "a".into(), "x".into()])
    );
    assert_eq!(absolute(&["tokio".into()], &[]), None);
    let code = code_only("let s = \"use crate::x;\"; // crate::y\nlet c = '{'; fn f<'a>() {}");
    assert!(!code.contains("crate::"), "{code}");
    assert!(code.contains("fn f<'a>() {}"), "{code}");
    let inline = inline_modules("fn a() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n");
    assert_eq!(inline.len(), 1);
    assert_eq!((inline[0].0.as_str(), inline[0].2), ("tests", true));
    let declared = declared_modules("#[cfg(test)]\n#[allow(dead_code)]\nmod tests;\npub mod a;");
    let flags: Vec<(&str, bool)> = declared.iter().map(|(n, _, t)| (n.as_str(), *t)).collect();
    assert_eq!(flags, [("tests", true), ("a", false)]);
    // The server's net layer really does lean on session (a reference
    // found through `crate::session::…`), and no cycle is reported for it.
    let server = Crate::read("server/src");
    let edges = server.sibling_edges(&[]);
    assert!(edges["net"].contains("session"), "{edges:?}");
    assert!(!edges["session"].contains("net"), "{edges:?}");
    assert_eq!(
        cycle(&BTreeMap::from([
            ("a".to_string(), BTreeSet::from(["b".to_string()])),
            ("b".to_string(), BTreeSet::from(["a".to_string()])),
        ])),
        Some(vec!["a".to_string(), "b".to_string(), "a".to_string()])
    );
}

#[test]
fn a_cycle_through_a_re_export_is_found() {
    // `b` takes `CHUNK` through its parent's `pub use a::CHUNK`, and `a`
    // uses `b`: the reference resolves to `a`, where `CHUNK` is defined.
    let file = |m: &[&str], text: &str| {
        let module: ModPath = m.iter().map(|s| s.to_string()).collect();
        (module, (PathBuf::from(m.join("/")), text.to_string()))
    };
    let krate = Crate::from_sources(BTreeMap::from([
        file(&[], "mod net;"),
        file(&["net"], "mod a;\nmod b;\npub use a::{serve, CHUNK};"),
        file(&["net", "a"], "use super::b;\npub const CHUNK: usize = 1;"),
        file(&["net", "b"], "use super::CHUNK;"),
    ]));
    let net = ["net".to_string()];
    assert_eq!(
        krate.resolve(&["crate".into(), "net".into(), "CHUNK".into()], 0),
        vec!["net".to_string(), "a".to_string()]
    );
    assert_eq!(
        cycle(&krate.sibling_edges(&net)),
        Some(vec!["a".to_string(), "b".to_string(), "a".to_string()])
    );
    // With `CHUNK` defined in the parent itself there is no cycle; nor is
    // there one through test code (`b`'s tests, inline or in a file).
    let krate = Crate::from_sources(BTreeMap::from([
        file(&[], "mod net;"),
        file(&["net"], "mod a;\nmod b;\npub const CHUNK: usize = 1;"),
        file(&["net", "a"], "use super::{b, CHUNK};"),
        file(
            &["net", "b"],
            "use super::CHUNK;\n#[cfg(test)]\nmod more;\n#[cfg(test)]\nmod tests {\n    use crate::net::a;\n}",
        ),
        file(&["net", "b", "more"], "use crate::net::a;"),
    ]));
    assert_eq!(cycle(&krate.sibling_edges(&net)), None);
}
