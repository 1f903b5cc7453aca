//! Work on many items on a few threads at once (files copied, objects asked for): the results
//! in the items' order, the first error stopping what has not begun.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::error::Result;

/// `work` on each of `items` on `threads` threads at once, the results in the items' order;
/// the first error stops the rest (those under way finish) and is returned.
pub fn each_at_once<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let next = Mutex::new(0usize);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<R>>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                    *next += 1;
                    *next - 1
                };
                if index >= items.len() || failed.load(Ordering::Relaxed) {
                    return;
                }
                let result = work(&items[index]);
                failed.fetch_or(result.is_err(), Ordering::Relaxed);
                results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(result);
            });
        }
    });
    let (mut done, mut first_error) = (Vec::with_capacity(items.len()), None);
    for result in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        match result {
            Some(Ok(value)) => done.push(value),
            Some(Err(error)) => {
                first_error.get_or_insert(error);
            }
            // Not begun: an error stopped the rest.
            None => {}
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(done),
    }
}
