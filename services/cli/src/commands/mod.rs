//! One module per command group; each holds its commands and the
//! [`Render`](crate::output::Render) of the answers they print.

pub mod auth;
pub mod completion;
pub mod context;
pub mod contract;
pub mod doc;
pub mod model;
pub mod pipeline;
pub mod project;
pub mod query;
pub mod recipe;
pub mod session;
pub mod version;
pub mod wallet;
