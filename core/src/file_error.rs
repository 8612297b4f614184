//! Errors located in the files people write (scenarios, plans, agent definitions, providers
//! files, registries): every format reports a problem with its file, line, column and dotted
//! field, and how to fix it, through the same few pieces.

use std::ops::Range;

/// A problem in a file (a scenario, a plan, an agent definition, a providers file, a
/// registry), located as precisely as the file allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}")]
pub struct FileError {
    /// The file as the caller named it.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Dotted path of the field, e.g. `trap[1].severity`; `(file)` for the whole file.
    pub field: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// Deserializes a TOML file, or says where it does not fit `T`: line, column and the dotted
/// field (`(file)` for the document as a whole). `file` names the file in the error.
pub fn parse_toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, Vec<FileError>> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        // A `Spanned` field adds a segment of toml's own to the path, which names nothing in
        // the file.
        let field = e.path().to_string().split('.').filter(|s| !s.is_empty() && !s.starts_with("$__serde_spanned_private")).collect::<Vec<_>>().join(".");
        let inner = e.into_inner();
        let field = if field.is_empty() { "(file)".to_string() } else { field };
        let mut errs = Errors::new(file, text);
        errs.at(inner.span().unwrap_or(0..0), field, inner.message().to_string());
        errs.list
    })
}

/// Collects errors with positions computed from byte offsets.
pub struct Errors<'a> {
    file: &'a str,
    text: &'a str,
    list: Vec<FileError>,
}

impl<'a> Errors<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Errors<'a> {
        Errors { file, text, list: Vec::new() }
    }

    /// `value` if no error was recorded, else every error.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<FileError>> {
        if self.list.is_empty() { Ok(value) } else { Err(self.list) }
    }

    /// Records an error at the first occurrence of `near` in the file (at the top when it is
    /// empty or absent): for checks made after parsing, where no span is left.
    pub fn near(&mut self, near: &str, field: impl Into<String>, message: impl Into<String>) {
        let offset = if near.is_empty() { None } else { self.text.find(near) };
        self.at(offset.map_or(0..0, |o| o..o), field, message);
    }

    /// Records an error at the first line that sets `key` (`key = …`, spaces allowed), or as
    /// [`Errors::near`] `key` when no line does: for a field whose value may also stand
    /// earlier in the file (an `adapter` named like the `id`).
    pub fn at_key(&mut self, key: &str, field: impl Into<String>, message: impl Into<String>) {
        let mut offset = 0;
        for line in self.text.split_inclusive('\n') {
            let body = line.trim_start();
            if body.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')) {
                let at = offset + (line.len() - body.len());
                return self.at(at..at, field, message);
            }
            offset += line.len();
        }
        self.near(key, field, message);
    }

    /// Records an error at a byte range of the file.
    pub fn at(&mut self, span: Range<usize>, field: impl Into<String>, message: impl Into<String>) {
        let (line, column) = line_col(self.text, span.start);
        self.list.push(FileError {
            file: self.file.to_string(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        });
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}
