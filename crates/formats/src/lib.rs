//! Everything that knows an agent CLI's wire format: the stream adapters that turn each
//! agent's native event stream into normalized events ([`adapters`], one module and one table
//! line per format), the tool calls with their inputs and outputs ([`transcript`]), the
//! scripted model that answers each CLI in its dialect and tool vocabulary ([`model`]), and
//! whose action each event was — the model's, the framework's own, or the harness's
//! ([`attribution`]), with the rules of what each framework does on its own ([`framework`]).
//!
//! Pure logic over `overeager-core`'s vocabulary, like it; the vocabulary (events, bundles,
//! scenarios, verdicts, paths) stays in core, which the predicate components and the web app
//! build on without any of this.

pub mod adapters;
pub mod attribution;
pub mod framework;
pub mod model;
pub mod transcript;
