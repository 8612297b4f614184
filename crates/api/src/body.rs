//! Request bodies that must keep moving: a body that pauses too long, falls below a minimum
//! rate once past a short grace period, or is still arriving at an overall deadline ends with
//! [`BodyTimeout`], which handlers answer with 408. A client that trickles bytes can then hold
//! a connection only briefly, never a slot other writers need.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// How fast a request body must arrive.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Longest pause between two pieces.
    pub idle: Duration,
    /// Time before the minimum rate applies (connection setup, a slow start).
    pub grace: Duration,
    /// Bytes per second, averaged from the end of the grace period.
    pub min_rate: u64,
    /// Longest a body may take in all.
    pub deadline: Duration,
}

/// What every request body on this server must keep up with.
pub const PACE: Pace = Pace { idle: super::BODY_IDLE_TIMEOUT, grace: Duration::from_secs(10), min_rate: 32 << 10, deadline: Duration::from_secs(15 * 60) };

/// Why a body was cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyTimeout {
    Stalled(Duration),
    TooSlow { received: u64, after: Duration, min_rate: u64 },
    Deadline(Duration),
}

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyTimeout::Stalled(d) => write!(f, "the request body stalled for {} s", d.as_secs()),
            BodyTimeout::TooSlow { received, after, min_rate } => {
                write!(f, "the request body arrived too slowly ({received} bytes in {} s; this server needs at least {} KiB/s after the first seconds)", after.as_secs(), min_rate >> 10)
            }
            BodyTimeout::Deadline(d) => write!(f, "the request body took longer than {} s, the limit for any body", d.as_secs()),
        }
    }
}

impl std::error::Error for BodyTimeout {}

/// The [`BodyTimeout`] somewhere in an error's chain of sources, if any.
pub fn timeout_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimeout> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<BodyTimeout>() {
            return Some(t);
        }
        cur = err.source();
    }
    None
}

/// A body held to a [`Pace`].
pub struct Paced<B> {
    inner: B,
    pace: Pace,
    start: Instant,
    received: u64,
    idle: Pin<Box<Sleep>>,
    due: Pin<Box<Sleep>>,
}

impl<B> Paced<B> {
    pub fn new(inner: B, pace: Pace) -> Paced<B> {
        let start = Instant::now();
        let mut p = Paced { inner, pace, start, received: 0, idle: Box::pin(tokio::time::sleep(pace.idle)), due: Box::pin(tokio::time::sleep(Duration::ZERO)) };
        let due = p.next_due();
        p.due.as_mut().reset(due);
        p
    }

    /// When the body falls behind if nothing more arrives: the rate's next due time, or the
    /// deadline if sooner.
    fn next_due(&self) -> Instant {
        let rate_due = self.pace.grace + Duration::from_secs_f64(self.received as f64 / self.pace.min_rate.max(1) as f64);
        self.start + rate_due.min(self.pace.deadline)
    }
}

impl<B> Body for Paced<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                }
                let now = Instant::now();
                this.idle.as_mut().reset(now + this.pace.idle);
                let due = this.next_due();
                this.due.as_mut().reset(due);
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if this.idle.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout::Stalled(this.pace.idle)))));
        }
        if this.due.as_mut().poll(cx).is_ready() {
            let after = this.start.elapsed();
            let e = if after >= this.pace.deadline {
                BodyTimeout::Deadline(this.pace.deadline)
            } else {
                BodyTimeout::TooSlow { received: this.received, after, min_rate: this.pace.min_rate }
            };
            return Poll::Ready(Some(Err(Box::new(e))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Holds every request body of the server to [`PACE`].
pub async fn paced(req: axum::extract::Request) -> axum::extract::Request {
    req.map(|b| axum::body::Body::new(Paced::new(b, PACE)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn pace() -> Pace {
        Pace { idle: Duration::from_secs(30), grace: Duration::from_secs(2), min_rate: 1000, deadline: Duration::from_secs(20) }
    }

    /// A body of `pieces` pieces of `size` bytes, one every `every`.
    fn trickle(pieces: usize, size: usize, every: Duration) -> axum::body::Body {
        let s = futures_util::stream::unfold(0, move |i| async move {
            if i == pieces {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; size])), i + 1))
        });
        axum::body::Body::from_stream(s)
    }

    async fn read(b: axum::body::Body) -> Result<usize, BodyTimeout> {
        match Paced::new(b, pace()).collect().await {
            Ok(c) => Ok(c.to_bytes().len()),
            Err(e) => Err(timeout_in(&*e).cloned().expect("a body timeout")),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_once_behind_the_minimum_rate_and_a_steady_body_is_not() {
        // 1 byte every 5 s: behind as soon as the grace period ends.
        match read(trickle(100, 1, Duration::from_secs(5))).await {
            Err(BodyTimeout::TooSlow { received, after, .. }) => {
                assert!(received <= 1, "{received}");
                assert!(after >= Duration::from_secs(2) && after < Duration::from_secs(3), "{after:?}");
            }
            other => panic!("{other:?}"),
        }
        // 2,000 bytes a second for 10 s: above the rate, under the deadline.
        assert_eq!(read(trickle(10, 2000, Duration::from_secs(1))).await, Ok(20_000));
        // Fast enough but endless: the deadline.
        assert_eq!(read(trickle(1000, 5000, Duration::from_secs(1))).await, Err(BodyTimeout::Deadline(Duration::from_secs(20))));
        // A pause longer than the idle limit.
        let p = Pace { idle: Duration::from_secs(3), grace: Duration::from_secs(10), ..pace() };
        let e = Paced::new(trickle(2, 100_000, Duration::from_secs(4)), p).collect().await.err().unwrap();
        assert_eq!(timeout_in(&*e), Some(&BodyTimeout::Stalled(Duration::from_secs(3))));
    }
}
