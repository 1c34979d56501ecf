//! Generated protobuf messages and gRPC stubs. Nothing hand-written lives here
//! except the module layout, the descriptor set used for reflection and how
//! enum values cross by name (`names`).

#![allow(clippy::all, clippy::pedantic)]

pub mod v1 {
    tonic::include_proto!("dialectic.v1");

    pub mod queue {
        tonic::include_proto!("dialectic.v1.queue");
    }
    pub mod wallet {
        tonic::include_proto!("dialectic.v1.wallet");
    }
    pub mod indexer {
        tonic::include_proto!("dialectic.v1.indexer");
    }
    pub mod planner {
        tonic::include_proto!("dialectic.v1.planner");
    }
    pub mod renderer {
        tonic::include_proto!("dialectic.v1.renderer");
    }
    pub mod executor {
        tonic::include_proto!("dialectic.v1.executor");
    }
}

pub mod names;

/// Descriptor set of every dialectic proto, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("dialectic_descriptor");

/// Current version of the queue envelope.
pub const ENVELOPE_VERSION: u32 = 1;
