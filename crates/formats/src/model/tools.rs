//! The tools a request offers, read as a model reads them: from their declarations (names,
//! descriptions and JSON schemas), not from a list of known agents. A tool taking a command
//! is a shell; one taking a path and contents writes; a path with old and new strings edits;
//! a path alone, under a name that says so, reads; a pattern, under a name that says so,
//! searches; a tool whose `command` chooses among `view`, `create` and `str_replace` is an
//! editor that does all three. An agent's definition may pin the tool of a role where the
//! reading is wrong.
//!
//! What a tool wants besides the step's own arguments is read from its schema too: required
//! choices get their lowest-risk value, required flags `false`, required text a short
//! sentence about the step.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Dialect, ToolCall, absolute, regex_escape, shell_command};
use overeager_core::paths::Roots;
use overeager_core::scenario::Step;

/// One parameter of a declared tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Param {
    /// Its JSON type (`string`, `array`, …), when the schema says.
    pub kind: Option<String>,
    /// The values of an `enum`.
    pub values: Vec<String>,
}

/// One declared tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub params: BTreeMap<String, Param>,
    pub required: Vec<String>,
}

/// What a play step needs a tool for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Shell,
    Read,
    Write,
    Edit,
    Grep,
    /// The agent's own tool for ending the task (OpenHands' `finish`).
    Finish,
}

impl Role {
    /// Every role, in order.
    pub const ALL: [Role; 6] = [Role::Shell, Role::Read, Role::Write, Role::Edit, Role::Grep, Role::Finish];

    /// The name used in agent definitions (`[tools] read = "view"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shell => "shell",
            Role::Read => "read",
            Role::Write => "write",
            Role::Edit => "edit",
            Role::Grep => "grep",
            Role::Finish => "finish",
        }
    }
}

/// Names a file's path takes, most specific first.
const PATH_PARAMS: &[&str] = &["file_path", "filePath", "filepath", "absolute_path", "path", "file", "filename", "target_file"];
/// Names of a search's directory.
const DIR_PARAMS: &[&str] = &["path", "dir_path", "directory", "dir"];
/// Names of a file's new contents.
const CONTENT_PARAMS: &[&str] = &["content", "contents", "file_text", "text"];
/// Names of the text an edit replaces, and of its replacement.
const OLD_PARAMS: &[&str] = &["old_string", "oldString", "old_str", "old_text", "old"];
const NEW_PARAMS: &[&str] = &["new_string", "newString", "new_str", "new_text", "new"];
/// Names of a command, and of a list of command lines.
const COMMAND_PARAMS: &[&str] = &["command", "cmd"];
const COMMANDS_PARAMS: &[&str] = &["commands"];
/// Words of a shell tool's name.
const SHELL_WORDS: &[&str] = &["bash", "shell", "terminal", "exec", "run", "process", "cmd"];

/// How a shell tool takes its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// One command line.
    Line,
    /// An argv (`["bash", "-lc", …]`).
    Argv,
    /// A list of command lines.
    Lines,
}

impl Tool {
    fn param<'a>(&self, names: &[&'a str]) -> Option<&'a str> {
        names.iter().copied().find(|n| self.params.contains_key(*n))
    }

    fn name_says(&self, words: &[&str]) -> bool {
        let n = self.name.to_lowercase();
        words.iter().any(|w| n.contains(w))
    }

    fn path(&self) -> Option<&'static str> {
        self.param(PATH_PARAMS)
    }

    /// The shell's command parameter and how it takes the command (a tool declared with no
    /// parameters at all takes a `command` line).
    fn command(&self) -> Option<(&'static str, Form)> {
        if self.params.is_empty() {
            return Some(("command", Form::Line));
        }
        if let Some(p) = self.param(COMMANDS_PARAMS).filter(|p| self.params[*p].kind.as_deref() == Some("array")) {
            return Some((p, Form::Lines));
        }
        let p = self.param(COMMAND_PARAMS)?;
        let param = &self.params[p];
        if !param.values.is_empty() {
            return None;
        }
        Some((p, if param.kind.as_deref() == Some("array") { Form::Argv } else { Form::Line }))
    }

    /// An editor: its `command` chooses among viewing, creating and replacing in a file.
    fn is_editor(&self) -> bool {
        let has = |v: &str| self.params.get("command").is_some_and(|c| c.values.iter().any(|x| x == v));
        self.path().is_some() && has("view") && has("create") && has("str_replace")
    }

    /// Whether this tool does `role`, by its declaration alone.
    pub fn plays(&self, role: Role) -> bool {
        let path = self.path().is_some();
        let edits = path && self.param(OLD_PARAMS).is_some() && self.param(NEW_PARAMS).is_some();
        match role {
            _ if self.is_editor() => matches!(role, Role::Read | Role::Write | Role::Edit),
            Role::Shell => !path && self.command().is_some() && self.name_says(SHELL_WORDS),
            Role::Read => {
                path && !edits
                    && self.param(CONTENT_PARAMS).is_none()
                    && self.name_says(&["read", "view", "cat", "open"])
                    && !self.name_says(&["image", "notebook", "mcp", "background", "dir", "list"])
            }
            Role::Write => path && !edits && self.param(CONTENT_PARAMS).is_some(),
            Role::Edit => edits,
            Role::Grep => self.params.contains_key("pattern") && self.name_says(&["grep", "search"]) && !self.name_says(&["web", "google"]),
            Role::Finish => {
                self.name_says(&["finish", "submit", "complet"]) && self.required.len() == 1 && self.params.get(&self.required[0]).is_some_and(|p| p.kind.as_deref() == Some("string"))
            }
        }
    }

    /// A shell whose working directory persists from one call to the next, as its description
    /// says ("a persistent shell session"; Claude Code 2.1: "The working directory persists
    /// between commands").
    pub fn keeps_cwd(&self) -> bool {
        let d = self.description.to_lowercase();
        d.contains("persistent shell session") || d.contains("working directory persists")
    }

    /// An edit tool that refuses a file the session has not read, as its description says.
    pub fn needs_read(&self) -> bool {
        let d = self.description.to_lowercase();
        ["without reading", "will fail if you did not read", "must read the file before"].iter().any(|p| d.contains(p))
    }

    /// `args` completed with what the schema requires besides the step: the lowest-risk choice,
    /// `false` for a flag, `what` for text; an optional description or summary gets `what` too,
    /// as a model describes its call.
    fn complete(&self, mut args: Map<String, Value>, what: &str) -> Value {
        for (name, p) in &self.params {
            if args.contains_key(name) {
                continue;
            }
            let required = self.required.contains(name);
            let value = match p.kind.as_deref() {
                _ if !p.values.is_empty() && required => {
                    let low = p.values.iter().find(|v| v.eq_ignore_ascii_case("low")).unwrap_or(&p.values[0]);
                    Some(json!(low))
                }
                Some("boolean") if required => Some(json!(false)),
                Some("string") if required || name == "description" || name == "summary" => Some(json!(what)),
                _ => None,
            };
            if let Some(v) = value {
                args.insert(name.clone(), v);
            }
        }
        Value::Object(args)
    }
}

fn properties(schema: Option<&Value>) -> (BTreeMap<String, Param>, Vec<String>) {
    let Some(s) = schema else { return Default::default() };
    let params = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let kind = v.get("type").and_then(Value::as_str).map(str::to_string);
                    let values = v.get("enum").and_then(Value::as_array).map(|e| e.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
                    (k.clone(), Param { kind, values })
                })
                .collect()
        })
        .unwrap_or_default();
    let required = s.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
    (params, required)
}

/// The tools a request declares, in their order, and the roles pinned by the agent's
/// definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocab {
    pub tools: Vec<Tool>,
    /// Role name → tool name.
    pub pins: BTreeMap<String, String>,
}

impl Vocab {
    /// Reads the declared tools of a request body in `dialect`.
    pub fn of_request(dialect: Dialect, body: &Value) -> Vocab {
        let mut tools = Vec::new();
        let list = body.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut add = |name: Option<&Value>, description: Option<&Value>, schema: Option<&Value>| {
            if let Some(n) = name.and_then(Value::as_str) {
                let (params, required) = properties(schema);
                tools.push(Tool { name: n.to_string(), description: description.and_then(Value::as_str).unwrap_or_default().to_string(), params, required });
            }
        };
        for t in list {
            match dialect {
                Dialect::Anthropic => add(t.get("name"), t.get("description"), t.get("input_schema")),
                Dialect::Chat => {
                    let f = t.get("function").unwrap_or(t);
                    add(f.get("name"), f.get("description"), f.get("parameters"));
                }
                Dialect::Responses => add(t.get("name"), t.get("description"), t.get("parameters")),
                Dialect::Gemini => {
                    for d in t.get("functionDeclarations").and_then(Value::as_array).into_iter().flatten() {
                        add(d.get("name"), d.get("description"), d.get("parametersJsonSchema").or_else(|| d.get("parameters")));
                    }
                }
            }
        }
        Vocab { tools, pins: BTreeMap::new() }
    }

    /// The same tools with the agent's pinned roles.
    pub fn pinned(mut self, pins: &BTreeMap<String, String>) -> Vocab {
        self.pins = pins.clone();
        self
    }

    /// Whether the request offers the tool `name`.
    pub fn has(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    /// The offered tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tool that does `role`: the pinned one when it is offered, else the first whose
    /// declaration says it does.
    pub fn tool_for(&self, role: Role) -> Option<&Tool> {
        if let Some(t) = self.pins.get(role.as_str()).and_then(|n| self.get(n)) {
            return Some(t);
        }
        self.tools.iter().find(|t| t.plays(role))
    }

    /// Whether `name` is the request's shell tool.
    pub fn is_shell(&self, name: &str) -> bool {
        self.tool_for(Role::Shell).is_some_and(|t| t.name == name)
    }

    /// Whether this is the agent's main loop (its working tools are offered) rather than a
    /// side request. Gemini CLI in its default mode offers no shell, so any file tool counts.
    pub fn is_main_loop(&self) -> bool {
        [Role::Shell, Role::Read, Role::Write, Role::Edit].into_iter().any(|r| self.tool_for(r).is_some())
    }
}

/// The shell tool call of `command` in the vocabulary offered; `default_shell` names the tool
/// to call when the request offers none (the agent then refuses it, which is observed).
pub fn shell_call(command: String, v: &Vocab, default_shell: &str) -> ToolCall {
    let what = "Run a shell command";
    let Some(t) = v.tool_for(Role::Shell) else {
        return ToolCall { name: default_shell.to_string(), args: json!({"command": command, "description": what}) };
    };
    let (param, form) = t.command().unwrap_or(("command", Form::Line));
    let value = match form {
        Form::Line => json!(command),
        Form::Argv => json!(["bash", "-lc", command]),
        Form::Lines => json!([command]),
    };
    let mut args = Map::new();
    args.insert(param.to_string(), value);
    ToolCall { name: t.name.clone(), args: t.complete(args, what) }
}

/// The call of a file tool: an editor's subcommand, or the tool itself.
fn file_call(t: &Tool, editor_command: &str, pairs: &[(&str, Value)], what: &str) -> ToolCall {
    let mut args = Map::new();
    if t.is_editor() {
        args.insert("command".into(), json!(editor_command));
    }
    for (k, v) in pairs {
        args.insert(k.to_string(), v.clone());
    }
    ToolCall { name: t.name.clone(), args: t.complete(args, what) }
}

/// The tool a play step becomes in the offered vocabulary: the tool of its role, or the
/// shell.
pub fn call_for(step: &Step, v: &Vocab, roots: &Roots, default_shell: &str) -> ToolCall {
    let path_of = |t: &Tool| t.path().unwrap_or("path");
    match step {
        Step::Read { path } if let Some(t) = v.tool_for(Role::Read) => file_call(t, "view", &[(path_of(t), json!(absolute(path, roots)))], "Read the file"),
        Step::Write { path, content } if let Some(t) = v.tool_for(Role::Write) => {
            let c = t.param(CONTENT_PARAMS).unwrap_or("content");
            file_call(t, "create", &[(path_of(t), json!(absolute(path, roots))), (c, json!(content))], "Write the file")
        }
        Step::Edit { path, old, new } if let Some(t) = v.tool_for(Role::Edit) => {
            let (o, n) = (t.param(OLD_PARAMS).unwrap_or("old_string"), t.param(NEW_PARAMS).unwrap_or("new_string"));
            file_call(t, "str_replace", &[(path_of(t), json!(absolute(path, roots))), (o, json!(old)), (n, json!(new))], "Apply the requested change.")
        }
        Step::Grep { pattern, path } if let Some(t) = v.tool_for(Role::Grep) => {
            let mut args = Map::new();
            args.insert("pattern".into(), json!(regex_escape(pattern)));
            if let Some(d) = t.param(DIR_PARAMS) {
                args.insert(d.into(), json!(absolute(path, roots)));
            }
            // Matching lines, not only the names of the files that hold them.
            if t.params.get("output_mode").is_some_and(|p| p.values.iter().any(|x| x == "content")) {
                args.insert("output_mode".into(), json!("content"));
            }
            ToolCall { name: t.name.clone(), args: t.complete(args, "Search the files") }
        }
        _ => shell_call(shell_command(step, roots), v, default_shell),
    }
}

/// The agent's own finishing call with `summary`, if it offers one.
pub fn finish_call(v: &Vocab, summary: &str) -> Option<ToolCall> {
    let t = v.tool_for(Role::Finish)?;
    let param = t.required.first().cloned().unwrap_or_else(|| "message".into());
    let mut args = Map::new();
    args.insert(param, json!(summary));
    Some(ToolCall { name: t.name.clone(), args: Value::Object(args) })
}

/// A tool declared as an Anthropic request declares it; a parameter's kind `enum:a,b` is a
/// string of those values. For tests.
#[cfg(test)]
pub(crate) fn declaration(name: &str, description: &str, params: &[(&str, &str)], required: &[&str]) -> Value {
    let props: Map<String, Value> = params
        .iter()
        .map(|(p, kind)| match kind.strip_prefix("enum:") {
            Some(values) => (p.to_string(), json!({"type": "string", "enum": values.split(',').collect::<Vec<_>>()})),
            None => (p.to_string(), json!({"type": kind})),
        })
        .collect();
    json!({"name": name, "description": description, "input_schema": {"type": "object", "properties": props, "required": required}})
}

/// The tools of the four first agents and of Copilot CLI as their requests declare them (abridged: the
/// parameters and the words of the descriptions that matter here), for tests.
#[cfg(test)]
pub(crate) fn declared(names: &[&str]) -> Vocab {
    let decl = |name: &str| -> (&str, &[(&str, &str)], &[&str]) {
        match name {
            "Bash" => ("Executes a given bash command in a persistent shell session", &[("command", "string"), ("description", "string"), ("timeout", "number")], &["command"]),
            "Read" => ("Reads a file from the local filesystem.", &[("file_path", "string"), ("offset", "number")], &["file_path"]),
            "Edit" => ("This tool will error if you attempt an edit without reading the file.", &[("file_path", "string"), ("old_string", "string"), ("new_string", "string")], &["file_path", "old_string", "new_string"]),
            "Write" => ("Writes a file to the local filesystem.", &[("file_path", "string"), ("content", "string")], &["file_path", "content"]),
            "Grep" => ("A powerful search tool", &[("pattern", "string"), ("path", "string"), ("output_mode", "enum:content,files_with_matches,count")], &["pattern"]),
            "shell" => ("Runs a shell command and returns its output.", &[("command", "array"), ("workdir", "string")], &["command"]),
            "run_shell_command" => ("This tool executes a given shell command as `bash -c <command>`.", &[("command", "string"), ("description", "string"), ("dir_path", "string")], &["command"]),
            "read_file" => ("Reads and returns the content of a specified file.", &[("file_path", "string")], &["file_path"]),
            "write_file" => ("Writes content to a specified file.", &[("file_path", "string"), ("content", "string")], &["file_path", "content"]),
            "replace" => ("Replaces text within a file.", &[("file_path", "string"), ("instruction", "string"), ("old_string", "string"), ("new_string", "string")], &["file_path", "instruction", "old_string", "new_string"]),
            "grep_search" => ("Searches for a regular expression pattern within file contents.", &[("pattern", "string"), ("dir_path", "string")], &["pattern"]),
            "terminal" => ("Execute a shell command in the terminal within a persistent shell session.", &[("command", "string"), ("security_risk", "enum:UNKNOWN,LOW,MEDIUM,HIGH"), ("summary", "string")], &["command", "security_risk"]),
            "file_editor" => ("Custom editing tool for viewing, creating and editing files", &[("command", "enum:view,create,str_replace,insert,undo_edit"), ("path", "string"), ("file_text", "string"), ("old_str", "string"), ("new_str", "string"), ("security_risk", "enum:UNKNOWN,LOW,MEDIUM,HIGH")], &["command", "path", "security_risk"]),
            "finish" => ("Signals the completion of the current task or conversation.", &[("message", "string")], &["message"]),
            // GitHub Copilot CLI's.
            "bash" => ("Runs a Bash command in an interactive Bash session.", &[("command", "string"), ("description", "string"), ("mode", "enum:sync,async")], &["command", "description"]),
            "create" => ("Tool for creating new files.", &[("path", "string"), ("file_text", "string")], &["path"]),
            "view" => ("Tool for viewing files and directories.", &[("path", "string"), ("view_range", "array")], &["path"]),
            other => panic!("no declaration of {other} here"),
        }
    };
    let tools: Vec<Value> = names
        .iter()
        .map(|n| {
            let (description, params, required) = decl(n);
            declaration(n, description, params, required)
        })
        .collect();
    Vocab::of_request(Dialect::Anthropic, &json!({"tools": tools}))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::declaration as tool;

    fn vocab(tools: &[Value]) -> Vocab {
        Vocab::of_request(Dialect::Anthropic, &json!({"tools": tools}))
    }

    fn roles(v: &Vocab) -> Vec<(&'static str, String)> {
        Role::ALL.iter().filter_map(|r| v.tool_for(*r).map(|t| (r.as_str(), t.name.clone()))).collect()
    }

    #[test]
    fn roles_are_read_from_the_declarations_of_tools_never_seen_before() {
        // OpenCode's tools, as its requests declare them.
        let opencode = vocab(&[
            tool("bash", "Executes a given bash command", &[("command", "string"), ("timeout", "number"), ("workdir", "string")], &["command"]),
            tool("edit", "Performs exact string replacements", &[("filePath", "string"), ("oldString", "string"), ("newString", "string"), ("replaceAll", "boolean")], &["filePath", "oldString", "newString"]),
            tool("glob", "Fast file pattern matching", &[("pattern", "string"), ("path", "string")], &["pattern"]),
            tool("grep", "Fast content search", &[("pattern", "string"), ("path", "string"), ("include", "string")], &["pattern"]),
            tool("read", "Reads a file", &[("filePath", "string"), ("offset", "number"), ("limit", "number")], &["filePath"]),
            tool("write", "Writes a file", &[("content", "string"), ("filePath", "string")], &["content", "filePath"]),
            tool("webfetch", "Fetches a URL", &[("url", "string")], &["url"]),
        ]);
        assert_eq!(roles(&opencode), [("shell", "bash"), ("read", "read"), ("write", "write"), ("edit", "edit"), ("grep", "grep")].map(|(a, b)| (a, b.to_string())));
        let r = Roots { workspace: "/w".into(), home: "/h".into() };
        let edit = call_for(&Step::Edit { path: "a.py".into(), old: "x".into(), new: "y".into() }, &opencode, &r, "bash");
        assert_eq!(edit.args, json!({"filePath": "/w/a.py", "oldString": "x", "newString": "y"}));
        // Look-alikes are not taken for a shell or a reader: a slash command, an image viewer.
        let lookalikes = vocab(&[
            tool("SlashCommand", "Execute a slash command", &[("command", "string")], &["command"]),
            tool("view_image", "Attach an image", &[("path", "string")], &["path"]),
            tool("task_tracker", "Track tasks", &[("command", "enum:view,plan")], &[]),
        ]);
        assert!(roles(&lookalikes).is_empty(), "{:?}", roles(&lookalikes));
        assert!(!lookalikes.is_main_loop());
        // A pin wins over the reading.
        let pinned = lookalikes.clone().pinned(&[("read".to_string(), "view_image".to_string())].into());
        assert_eq!(pinned.tool_for(Role::Read).unwrap().name, "view_image");
    }

    #[test]
    fn an_editor_reads_writes_and_edits_and_required_arguments_are_filled_from_the_schema() {
        let v = vocab(&[
            tool("terminal", "Execute a shell command in the terminal within a persistent shell session.", &[("command", "string"), ("is_input", "boolean"), ("security_risk", "enum:UNKNOWN,LOW,MEDIUM,HIGH"), ("summary", "string")], &["command", "security_risk"]),
            tool("file_editor", "Custom editing tool", &[("command", "enum:view,create,str_replace,insert"), ("path", "string"), ("file_text", "string"), ("old_str", "string"), ("new_str", "string"), ("security_risk", "enum:UNKNOWN,LOW,MEDIUM,HIGH")], &["command", "path", "security_risk"]),
            tool("finish", "Signals the completion", &[("message", "string")], &["message"]),
        ]);
        let r = Roots { workspace: "/w".into(), home: "/h".into() };
        let w = call_for(&Step::Write { path: "n.txt".into(), content: "hi".into() }, &v, &r, "terminal");
        assert_eq!(w.args, json!({"command": "create", "path": "/w/n.txt", "file_text": "hi", "security_risk": "LOW"}));
        let sh = shell_call("ls".into(), &v, "terminal");
        assert_eq!(sh.args, json!({"command": "ls", "security_risk": "LOW", "summary": "Run a shell command"}));
        assert!(v.get("terminal").unwrap().keeps_cwd());
        let claude_2_1 = vocab(&[tool("Bash", "Executes a given bash command and returns its output.\n\nThe working directory persists between commands, but shell state does not.", &[("command", "string")], &["command"])]);
        assert!(claude_2_1.get("Bash").unwrap().keeps_cwd());
        assert_eq!(finish_call(&v, "done").unwrap().args, json!({"message": "done"}));
    }

    #[test]
    fn a_shell_takes_a_line_an_argv_or_a_list_as_its_schema_says() {
        let argv = vocab(&[tool("shell", "Runs a shell command", &[("command", "array"), ("workdir", "string")], &["command"])]);
        assert_eq!(shell_call("ls".into(), &argv, "shell").args, json!({"command": ["bash", "-lc", "ls"]}));
        let lines = vocab(&[tool("run_commands", "Run commands", &[("commands", "array")], &["commands"])]);
        assert_eq!(shell_call("ls".into(), &lines, "x").args, json!({"commands": ["ls"]}));
        let cmd = vocab(&[tool("exec_command", "Runs a command", &[("cmd", "string")], &["cmd"])]);
        assert_eq!(shell_call("ls".into(), &cmd, "x").args, json!({"cmd": "ls"}));
    }
}
