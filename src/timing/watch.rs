//! What long work says as it goes, in one shape: a [`Watch`] hears each of the work's events
//! and answers whether the work goes on. Progress (a bar moved, a line printed, a digest kept)
//! and an early end (a tune's measurement that has measured enough) are the same watcher; each
//! piece of work names its own events (a batch measured, the steps so far, a model row, the
//! frames a generated dataset has encoded), and `Break` ends it where it can end early.

use std::ops::ControlFlow;

/// Hears the events `E` of a piece of work; `Break` asks it to end early.
pub trait Watch<E> {
    /// Hears one event: `Continue` lets the work go on, `Break` ends it where it can end early
    /// (work that cannot goes on, and says so where it documents its events).
    fn hear(&mut self, event: E) -> ControlFlow<()>;
}

impl<E, F: FnMut(E) -> ControlFlow<()>> Watch<E> for F {
    fn hear(&mut self, event: E) -> ControlFlow<()> {
        self(event)
    }
}

/// No one watching: every event heard, the work never ended early.
pub struct NoOne;

impl<E> Watch<E> for NoOne {
    fn hear(&mut self, _: E) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// A watcher that follows progress only: its function hears every event, and the work always
/// goes on.
pub struct Progress<F>(pub F);

impl<E, F: FnMut(E)> Watch<E> for Progress<F> {
    fn hear(&mut self, event: E) -> ControlFlow<()> {
        (self.0)(event);
        ControlFlow::Continue(())
    }
}

/// A watcher that ends the work once `done` holds of an event, and hears nothing else.
pub struct EndsWhen<F>(pub F);

impl<E, F: FnMut(E) -> bool> Watch<E> for EndsWhen<F> {
    fn hear(&mut self, event: E) -> ControlFlow<()> {
        match (self.0)(event) {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hears `events` until the watcher breaks: how many it heard.
    fn heard(watch: &mut dyn Watch<u32>, events: &[u32]) -> usize {
        let mut n = 0;
        for &event in events {
            n += 1;
            if watch.hear(event).is_break() {
                break;
            }
        }
        n
    }

    #[test]
    fn each_watcher_hears_until_it_breaks() {
        let events = [1, 2, 3, 4];
        assert_eq!(heard(&mut NoOne, &events), 4);
        let mut seen = Vec::new();
        assert_eq!(heard(&mut Progress(|e| seen.push(e)), &events), 4);
        assert_eq!(seen, events);
        assert_eq!(heard(&mut EndsWhen(|e| e >= 2), &events), 2);
        let mut sum = 0;
        let mut closure = |e| {
            sum += e;
            if sum > 5 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        assert_eq!(heard(&mut closure, &events), 3);
    }
}
