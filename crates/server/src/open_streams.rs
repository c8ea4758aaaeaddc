//! The gauge of open event streams (SSE and NDJSON), recorded through the
//! `metrics` facade: a stream counts from its response until it is dropped.

use futures::{Stream, StreamExt};

/// `stream`, counted in `roundtable_open_streams{kind}` while it lives.
pub(crate) fn counted<S: Stream>(kind: &'static str, stream: S) -> impl Stream<Item = S::Item> {
    let open = Open::new(kind);
    stream.map(move |item| {
        let _counted = &open;
        item
    })
}

struct Open(&'static str);

impl Open {
    fn new(kind: &'static str) -> Self {
        metrics::gauge!("roundtable_open_streams", "kind" => kind).increment(1.0);
        Self(kind)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::gauge!("roundtable_open_streams", "kind" => self.0).decrement(1.0);
    }
}
