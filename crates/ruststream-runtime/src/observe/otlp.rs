//! Exporting spans over OTLP/HTTP (protobuf), set up by one call.
//!
//! The exporter is `opentelemetry-otlp`'s, with a small HTTP/1.1 client of this crate
//! (plain `http://`, blocking, on the batch processor's own thread): no HTTP stack,
//! TLS or async runtime is pulled in for it. An `https://` collector is reached through
//! a local collector or agent, or with an exporter of your own ([`Tracing::new`]).

use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

use super::Tracing;

/// Tracing could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracingError {
    /// The OTLP exporter could not be built (an endpoint that does not parse).
    #[error("otlp exporter: {0}")]
    Exporter(String),
}

/// Sets up tracing exported over OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (default
/// `http://localhost:4318`; spans go to its `/v1/traces`), the service named by
/// `OTEL_SERVICE_NAME` (default `ruststream`), and makes it the process's global tracer
/// provider (so spans of your own join the same traces). Add the returned [`Tracing`]
/// to the service with [`App::tracing`](crate::App::tracing), and shut its provider down
/// before the process ends to export the last spans.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tracing = ruststream::observe::init_tracing()?;
/// // App::new(broker).tracing(&tracing) ... .run().await?;
/// tracing.provider().shutdown()?;
/// # Ok(()) }
/// ```
pub fn init_tracing() -> Result<Tracing, TracingError> {
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .unwrap_or_else(|_| "http://localhost:4318".to_owned());
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "ruststream".to_owned());
    let tracing = Tracing::otlp(&endpoint, &service)?;
    opentelemetry::global::set_tracer_provider(tracing.provider().clone());
    Ok(tracing)
}

impl Tracing {
    /// Tracing exported over OTLP/HTTP (protobuf) to the collector at `endpoint`
    /// (`http://host:4318`; spans go to its `/v1/traces`), in batches, as service
    /// `service`. Not made the global provider (see [`init_tracing`]).
    pub fn otlp(endpoint: &str, service: &str) -> Result<Self, TracingError> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_http_client(Client {
                timeout: Duration::from_secs(10),
            })
            .build()
            .map_err(|error| TracingError::Exporter(error.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build();
        Ok(Self::new(provider))
    }
}

/// A blocking HTTP/1.1 client for plain `http://` endpoints: one connection per export.
#[derive(Debug)]
struct Client {
    timeout: Duration,
}

/// The largest response body read.
const MAX_RESPONSE: u64 = 4 << 20;

impl HttpClient for Client {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        // The batch processor runs exports on a thread of its own: blocking is fine.
        let result = post(&request, self.timeout);
        Box::pin(std::future::ready(result))
    }
}

fn post(request: &Request<Bytes>, timeout: Duration) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri();
    if uri.scheme_str() != Some("http") {
        return Err(format!("{uri}: only http:// endpoints are supported").into());
    }
    let host = uri.host().ok_or("endpoint without a host")?;
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or("endpoint host does not resolve")?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    for (name, value) in request.headers() {
        if let Ok(value) = value.to_str() {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    let body = request.body();
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE).read_to_end(&mut raw)?;
    parse_response(&raw)
}

/// A response read to its end (`Connection: close`): status line, headers, body (with
/// `Content-Length`, chunked, or up to the end).
fn parse_response(raw: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("response without a header end")?;
    let head = std::str::from_utf8(&raw[..end])?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("response without a status")?;
    let mut builder = Response::builder().status(status);
    let (mut length, mut chunked) = (None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
        builder = builder.header(name.trim(), value);
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest[..length.unwrap_or(rest.len()).min(rest.len())].to_vec()
    };
    Ok(builder.body(Bytes::from(body))?)
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let line = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk without a size line")?;
        let size = std::str::from_utf8(&rest[..line])?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)?;
        rest = &rest[line + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("chunk cut short")?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::parse_response;

    #[test]
    fn responses_parse_with_a_length_chunked_and_to_the_end() {
        let r =
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokXX").expect("parses");
        assert_eq!((r.status().as_u16(), &r.body()[..]), (200, &b"ok"[..]));
        let raw =
            b"HTTP/1.1 503 No\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n";
        let r = parse_response(raw).expect("parses");
        assert_eq!((r.status().as_u16(), &r.body()[..]), (503, &b"abc"[..]));
        let r = parse_response(b"HTTP/1.0 200 OK\r\n\r\nall").expect("parses");
        assert_eq!(&r.body()[..], b"all");
        assert!(parse_response(b"garbage").is_err());
    }
}
