//! An OpenAPI 3.1 description of a service's Connect unary calls, generated
//! from the same descriptors the server decodes requests with, comments
//! included: a path per unary method, a schema per message and enum it
//! reaches, in the JSON this server reads and writes (proto field names,
//! 64-bit integers as strings, enums by name, timestamps in RFC 3339). It is
//! checked in as `docs/openapi.json`; a test fails when it is not current.

use super::ConnectError;
use prost_reflect::{
    DescriptorPool, EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor, ServiceDescriptor,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Where the error and security definitions sit in the document.
const ERROR_SCHEMA: &str = "connect.error";

/// The document for `service` in the encoded descriptor set.
pub fn document(descriptors: &[u8], service: &str) -> Result<Value, ConnectError> {
    let pool = DescriptorPool::decode(descriptors)?;
    let service = pool
        .get_service_by_name(service)
        .ok_or_else(|| ConnectError::UnknownService(service.to_string()))?;
    let mut schemas = Schemas::default();
    let mut paths = Map::new();
    let mut streaming = Vec::new();
    for method in service.methods() {
        if method.is_client_streaming() || method.is_server_streaming() {
            streaming.push(method.name().to_string());
            continue;
        }
        let input = schemas.reference(&method.input());
        let output = schemas.reference(&method.output());
        let path = format!("/{}/{}", service.full_name(), method.name());
        let about = comment(method.parent_file().file_descriptor_proto(), method.path());
        let operation = described(
            json!({
                "operationId": method.name(),
                "requestBody": {
                    "required": true,
                    "content": { "application/json": { "schema": input } },
                },
                "responses": {
                    "200": {
                        "description": format!("A {}", method.output().full_name()),
                        "headers": { "x-request-id": { "$ref": "#/components/headers/x-request-id" } },
                        "content": { "application/json": { "schema": output } },
                    },
                    "default": { "$ref": "#/components/responses/error" },
                },
            }),
            about,
        );
        paths.insert(path, json!({ "post": operation }));
    }
    Ok(json!({
        "openapi": "3.1.0",
        "info": info(&service, &streaming),
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": components(schemas.done()),
    }))
}

fn info(service: &ServiceDescriptor, streaming: &[String]) -> Value {
    let about = comment(
        service.parent_file().file_descriptor_proto(),
        service.path(),
    );
    let description = format!(
        "{about}\n\nGenerated from the protos (`docs/openapi.json`, kept current by a test). \
         Each unary RPC is a Connect unary call: POST /{}/<Method> with a JSON body and \
         `content-type: application/json`, the API key as `authorization: Bearer <key>`. \
         Answers list every field under its .proto name. Streaming RPCs are served over \
         gRPC and gRPC-Web only: {}.",
        service.full_name(),
        streaming.join(", ")
    );
    json!({
        "title": service.full_name(),
        "version": service.package_name(),
        "description": description.trim_start(),
    })
}

fn components(schemas: BTreeMap<String, Value>) -> Value {
    let mut schemas: Map<String, Value> = schemas.into_iter().collect();
    schemas.insert(
        ERROR_SCHEMA.into(),
        json!({
            "type": "object",
            "description": "A Connect error: the gRPC code's name, a message, and the google.rpc details (ErrorInfo with the reason, RequestInfo with the request id, RetryInfo when a retry can succeed, BadRequest naming a field).",
            "properties": {
                "code": { "type": "string", "examples": ["not_found"] },
                "message": { "type": "string" },
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": { "type": "string", "examples": ["google.rpc.ErrorInfo"] },
                            "value": { "type": "string", "contentEncoding": "base64" },
                            "debug": { "type": "object" },
                        },
                    },
                },
            },
        }),
    );
    json!({
        "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        "headers": {
            "x-request-id": {
                "description": "The id the server knows the call by: the caller's own (1-128 of A-Z a-z 0-9 . _ : -) or a new UUIDv7.",
                "schema": { "type": "string" },
            },
        },
        "responses": {
            "error": {
                "description": "An error; the HTTP status follows its code (not_found 404, invalid_argument 400, unauthenticated 401, resource_exhausted 429, ...).",
                "headers": { "x-request-id": { "$ref": "#/components/headers/x-request-id" } },
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{ERROR_SCHEMA}") } } },
            },
        },
        "schemas": schemas,
    })
}

/// The schemas the document references, each generated once.
#[derive(Default)]
struct Schemas {
    done: BTreeMap<String, Value>,
}

impl Schemas {
    fn done(self) -> BTreeMap<String, Value> {
        self.done
    }

    fn reference(&mut self, message: &MessageDescriptor) -> Value {
        if let Some(inline) = well_known(message.full_name()) {
            return inline;
        }
        let name = message.full_name().to_string();
        if !self.done.contains_key(&name) {
            // Claimed first: a message that contains itself ends here.
            self.done.insert(name.clone(), Value::Null);
            let schema = self.message(message);
            self.done.insert(name.clone(), schema);
        }
        json!({ "$ref": format!("#/components/schemas/{name}") })
    }

    fn message(&mut self, message: &MessageDescriptor) -> Value {
        let file = message.parent_file();
        let mut properties = Map::new();
        for field in message.fields() {
            let mut schema = self.field(&field);
            let about = comment(file.file_descriptor_proto(), field.path());
            if schema.get("$ref").is_some() && !about.is_empty() {
                // A $ref's siblings are ignored by older tools: wrap it.
                schema = json!({ "allOf": [schema] });
            }
            properties.insert(field.name().to_string(), described(schema, about));
        }
        let about = comment(file.file_descriptor_proto(), message.path());
        described(json!({ "type": "object", "properties": properties }), about)
    }

    fn field(&mut self, field: &FieldDescriptor) -> Value {
        if field.is_map()
            && let Kind::Message(entry) = field.kind()
        {
            let value = self.kind(&entry.map_entry_value_field().kind());
            return json!({ "type": "object", "additionalProperties": value });
        }
        let single = self.kind(&field.kind());
        if field.is_list() {
            json!({ "type": "array", "items": single })
        } else {
            single
        }
    }

    fn kind(&mut self, kind: &Kind) -> Value {
        match kind {
            Kind::Double => json!({ "type": "number", "format": "double" }),
            Kind::Float => json!({ "type": "number", "format": "float" }),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Kind::Uint32 | Kind::Fixed32 => json!({ "type": "integer", "format": "uint32" }),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                json!({ "type": "string", "format": "int64" })
            }
            Kind::Uint64 | Kind::Fixed64 => json!({ "type": "string", "format": "uint64" }),
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::String => json!({ "type": "string" }),
            Kind::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
            Kind::Enum(e) => {
                let name = e.full_name().to_string();
                self.done
                    .entry(name.clone())
                    .or_insert_with(|| enumeration(e));
                json!({ "$ref": format!("#/components/schemas/{name}") })
            }
            Kind::Message(m) => self.reference(m),
        }
    }
}

fn enumeration(e: &EnumDescriptor) -> Value {
    let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
    let about = comment(e.parent_file().file_descriptor_proto(), e.path());
    described(json!({ "type": "string", "enum": names }), about)
}

/// `schema` with `about` as its description, when there is one.
fn described(mut schema: Value, about: String) -> Value {
    if let (Some(object), false) = (schema.as_object_mut(), about.is_empty()) {
        object.insert("description".into(), about.into());
    }
    schema
}

/// The JSON mapping's own forms for the well-known types the API uses.
fn well_known(name: &str) -> Option<Value> {
    Some(match name {
        "google.protobuf.Timestamp" => json!({ "type": "string", "format": "date-time" }),
        "google.protobuf.Duration" => json!({ "type": "string", "examples": ["1.5s"] }),
        "google.protobuf.Empty" => json!({ "type": "object" }),
        "google.protobuf.Struct" => json!({ "type": "object" }),
        "google.protobuf.Value" => json!({}),
        _ => return None,
    })
}

/// The leading comment of the element at `path` in its file, as written.
fn comment(file: &prost_types::FileDescriptorProto, path: &[i32]) -> String {
    let Some(info) = &file.source_code_info else {
        return String::new();
    };
    info.location
        .iter()
        .find(|location| location.path == path)
        .and_then(|location| location.leading_comments.as_deref())
        .map(|text| {
            text.lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join("\n")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const SERVICE: &str = "dialectic.v1.DialecticService";

    fn checked_in() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
    }

    /// `DIALECTIC_UPDATE_OPENAPI=1 cargo test -p dialectic-runtime --lib openapi`
    /// writes the file after a proto change.
    #[test]
    fn the_checked_in_openapi_document_is_current() {
        let generated = document(dialectic_proto::FILE_DESCRIPTOR_SET, SERVICE).expect("generated");
        let text = serde_json::to_string_pretty(&generated).expect("serialised") + "\n";
        if std::env::var_os("DIALECTIC_UPDATE_OPENAPI").is_some() {
            std::fs::write(checked_in(), &text).expect("docs/openapi.json written");
        }
        let current = std::fs::read_to_string(checked_in()).unwrap_or_default();
        assert!(
            current == text,
            "docs/openapi.json is not what the protos generate; run \
             DIALECTIC_UPDATE_OPENAPI=1 cargo test -p dialectic-runtime --lib openapi"
        );
    }

    #[test]
    fn every_unary_rpc_has_a_path_and_streams_have_none() {
        let doc = document(dialectic_proto::FILE_DESCRIPTOR_SET, SERVICE).expect("generated");
        let paths = doc["paths"].as_object().expect("paths");
        let create = &paths["/dialectic.v1.DialecticService/CreateProject"]["post"];
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/dialectic.v1.CreateProjectRequest"
        );
        assert!(!paths.contains_key("/dialectic.v1.DialecticService/WatchSession"));
        assert!(!paths.contains_key("/dialectic.v1.DialecticService/ExportProject"));
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        assert!(
            schemas.values().all(|s| !s.is_null()),
            "every referenced schema is filled"
        );
        let project = &schemas["dialectic.v1.Project"]["properties"];
        assert_eq!(project["created_at"]["format"], "date-time");
        let request = &schemas["dialectic.v1.CreateProjectRequest"];
        assert!(
            request["properties"]["name"]["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "field comments carried over: {request}"
        );
    }
}
