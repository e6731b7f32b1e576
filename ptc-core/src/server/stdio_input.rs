//! The stdio host's input, which says when it ends. rmcp closes a session only after every
//! holder of its sender has let go (or a drain of up to 5 s): the sessions told of tool-list
//! changes hold one, so they are let go at the end of the input, and `ptc serve` on stdio exits
//! as soon as its client closes stdin.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// `inner`, calling `at_end` once when a read finds it at its end.
pub(crate) struct UntilEnd<R> {
    inner: R,
    at_end: Option<Box<dyn FnOnce() + Send>>,
}

impl<R> UntilEnd<R> {
    pub(crate) fn new(inner: R, at_end: impl FnOnce() + Send + 'static) -> Self {
        UntilEnd {
            inner,
            at_end: Some(Box::new(at_end)),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for UntilEnd<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A read into a full buffer reads nothing without being at the end.
        let (room, before) = (buf.remaining() > 0, buf.filled().len());
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if room
            && matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && let Some(at_end) = self.at_end.take()
        {
            at_end();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::UntilEnd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_end_is_said_once_when_a_read_finds_it_and_not_before() {
        let ends = Arc::new(AtomicUsize::new(0));
        let counted = ends.clone();
        let mut input = UntilEnd::new(&b"abc"[..], move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let mut two = [0u8; 2];
        assert_eq!(input.read(&mut two).await.unwrap(), 2);
        assert_eq!(input.read(&mut [][..]).await.unwrap(), 0, "no room");
        assert_eq!(
            ends.load(Ordering::SeqCst),
            0,
            "a read with no room is not the end"
        );
        assert_eq!(input.read(&mut two).await.unwrap(), 1);
        assert_eq!(ends.load(Ordering::SeqCst), 0, "not at the end yet");
        assert_eq!(input.read(&mut two).await.unwrap(), 0);
        assert_eq!(input.read(&mut two).await.unwrap(), 0);
        assert_eq!(ends.load(Ordering::SeqCst), 1, "said once");
    }
}
