use super::*;

/// A uint8 frame of `len` values, each `value`.
fn frame(len: usize, value: u8) -> Vec<u8> {
    vec![value; len]
}

fn key(file: u64, time: f64) -> FrameKey {
    FrameKey { file, time_bits: time.to_bits() }
}

#[test]
fn a_frame_kept_by_one_process_is_copied_out_by_another_value_for_value() {
    let made = SharedFrames::create(1 << 20, 1000).unwrap();
    let opened = SharedFrames::open(made.path()).unwrap();
    assert_eq!(made.file(Path::new("a/b.mp4")), opened.file(Path::new("a/b.mp4")));
    let kept: Vec<u8> = (0..1000).map(|i| (i * 7 % 251) as u8).collect();
    made.keep(key(1, 0.5), &FrameBuffer::U8(&mut kept.clone()));
    let mut out = vec![0u8; 1000];
    assert!(opened.copy_out(key(1, 0.5), FrameBuffer::U8(&mut out)));
    assert_eq!(out, kept);
    // Float32 frames travel as their bytes.
    let mut floats: Vec<f32> = (0..250).map(|i| i as f32 / 255.0).collect();
    opened.keep(key(1, 1.0), &FrameBuffer::F32(&mut floats));
    let mut back = vec![0f32; 250];
    assert!(made.copy_out(key(1, 1.0), FrameBuffer::F32(&mut back)));
    assert_eq!(back, floats);
    // Another time, another file: not held.
    assert!(!made.copy_out(key(1, 1.5), FrameBuffer::U8(&mut out)));
    assert!(!made.copy_out(key(2, 0.5), FrameBuffer::U8(&mut out)));
    let stats = opened.stats();
    assert_eq!((stats.held, stats.held_bytes, stats.copied), (2, 2000, 2));
}

#[test]
fn a_frame_of_another_format_or_length_is_not_copied_and_the_buffer_is_left() {
    let store = SharedFrames::create(1 << 20, 4000).unwrap();
    store.keep(key(0, 0.0), &FrameBuffer::U8(&mut frame(1000, 9)));
    let mut floats = vec![2f32; 250];
    assert!(!store.copy_out(key(0, 0.0), FrameBuffer::F32(&mut floats)), "bytes of a uint8 frame");
    assert!(floats.iter().all(|&v| v == 2.0));
    let mut short = frame(999, 1);
    assert!(!store.copy_out(key(0, 0.0), FrameBuffer::U8(&mut short)));
    assert!(short.iter().all(|&v| v == 1));
    // Kept once: the same key again neither takes a second entry nor counts as held twice.
    store.keep(key(0, 0.0), &FrameBuffer::U8(&mut frame(1000, 9)));
    assert_eq!(store.stats().held, 1);
}

#[test]
fn a_full_store_keeps_what_fits_never_grows_and_gives_back_only_what_it_kept() {
    // Room for about 6 frames of 1000 bytes (1024 with their alignment) and their entries.
    let budget = 2 * PAGE_BYTES + 6 * (1024 + ENTRY_BYTES);
    let store = SharedFrames::create(budget, 1000).unwrap();
    let len = std::fs::metadata(store.path()).unwrap().len();
    assert!(len <= budget, "a file of {len} bytes for a budget of {budget}");
    for n in 0..100u8 {
        store.keep(key(0, n as f64), &FrameBuffer::U8(&mut frame(1000, n)));
    }
    let stats = store.stats();
    assert_eq!(stats.slots, 6);
    assert_eq!(stats.held, 6, "every slot filled");
    assert_eq!(stats.not_kept, 94);
    assert_eq!(std::fs::metadata(store.path()).unwrap().len(), len);
    let mut copied = 0;
    for n in 0..100u8 {
        let mut out = frame(1000, 255);
        if store.copy_out(key(0, n as f64), FrameBuffer::U8(&mut out)) {
            assert!(out.iter().all(|&v| v == n), "frame {n} copied out as another");
            copied += 1;
        }
    }
    assert_eq!(copied, 6);
    // A frame larger than a slot is never kept.
    store.keep(key(9, 0.0), &FrameBuffer::U8(&mut frame(1100, 1)));
    assert_eq!(store.stats().not_kept, 95);
}

#[test]
fn threads_keeping_and_copying_the_same_frames_copy_only_whole_kept_frames() {
    let store = SharedFrames::create(8 << 20, 4096).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let store = &store;
            scope.spawn(move || {
                for round in 0..200u64 {
                    let n = (round * 7 + thread) % 64;
                    let mut out = frame(4096, 0);
                    if store.copy_out(key(3, n as f64), FrameBuffer::U8(&mut out)) {
                        assert!(out.iter().all(|&v| v == n as u8), "a torn frame {n}");
                    } else {
                        store.keep(key(3, n as f64), &FrameBuffer::U8(&mut frame(4096, n as u8)));
                    }
                }
            });
        }
    });
    let stats = store.stats();
    assert!(stats.held >= 64, "{stats:?}");
    assert_eq!(stats.not_kept, 0);
}

#[test]
fn the_maker_removes_the_file_and_another_process_leaves_it() {
    let made = SharedFrames::create(1 << 20, 1000).unwrap();
    let path = made.path().to_path_buf();
    assert!(path.file_name().unwrap().to_str().unwrap().starts_with(PREFIX));
    drop(SharedFrames::open(&path).unwrap());
    assert!(path.exists(), "an opened store leaves the file to its maker");
    drop(made);
    assert!(!path.exists(), "the maker removes it");
    let gone = SharedFrames::open(&path).err().unwrap().to_string();
    assert!(gone.contains(&*path.to_string_lossy()), "{gone}");
}

#[test]
fn a_file_that_is_no_frame_cache_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("frames");
    std::fs::write(&path, vec![7u8; 8192]).unwrap();
    let refused = SharedFrames::open(&path).err().unwrap().to_string();
    assert!(refused.contains("not a feedbench frame cache"), "{refused}");
    assert!(refused.contains(&*path.to_string_lossy()), "{refused}");
}

#[test]
fn a_budget_that_holds_no_frame_or_more_than_is_free_is_refused_saying_so() {
    let small = SharedFrames::create(5000, 1000).err().unwrap().to_string();
    assert!(small.contains("holds no frame of 1000 bytes"), "{small}");
    let huge = SharedFrames::create(u64::MAX / 4, 1000).err().unwrap().to_string();
    assert!(huge.contains("does not fit") && huge.contains("--shm-size"), "{huge}");
}

#[test]
fn the_files_of_makers_that_died_are_removed_by_the_next_one() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = directory().join(format!("{PREFIX}{dead}-0"));
    std::fs::write(&stale, b"left by a killed process").unwrap();
    let alive = directory().join(format!("{PREFIX}{}-999", std::process::id()));
    std::fs::write(&alive, b"this process's").unwrap();
    let _store = SharedFrames::create(1 << 20, 1000).unwrap();
    assert!(!stale.exists(), "a dead maker's file is removed");
    assert!(alive.exists(), "a running maker's is not");
    std::fs::remove_file(alive).unwrap();
}
