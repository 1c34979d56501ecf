//! Domain rules of dialectic. No I/O lives here: every function is a pure
//! transformation that the services apply inside their own transactions.

pub mod apikey;
pub mod blackboard;
pub mod clarify;
pub mod context;
pub mod contract_analysis;
pub mod dates;
pub mod digest;
pub mod document_role;
pub mod error;
pub mod fact_check;
pub mod fanout;
pub mod gate;
pub mod ids;
pub mod job;
pub mod json_document;
pub mod ledger;
pub mod list_filter;
pub mod model_role;
pub mod output_record;
pub mod paths;
pub mod payload;
pub mod pipeline;
pub mod position;
pub mod price;
pub mod progress;
pub mod prompt;
pub mod pushback;
pub mod query;
pub mod recipe;
pub mod revisit;
pub mod sanitize;
pub mod secrets;
pub mod service_auth;
pub mod session;
pub mod shape;
pub mod skip_rule;
pub mod slug;
pub mod structured;
pub mod tokens;
pub mod zip;

pub use ids::*;
