use super::*;

fn parse(text: &str) -> Result<GuardConfig, String> {
    let config: GuardConfig = toml::from_str(text).map_err(|e| e.to_string())?;
    config.check(Path::new("guard.toml")).map_err(|e| e.to_string())?;
    Ok(config)
}

const DATASET: &str = "[dataset]\nsynth = \"pusht\"\nepisodes = 4\n";

#[test]
fn cells_take_the_guard_defaults() {
    let config = parse(&format!("{DATASET}[[cell]]\nname = \"w2\"\nworkers = 2\nbatch = 16\n"));
    let config = config.unwrap();
    let cell = &config.cells[0];
    let knobs = cell.knobs.config();
    assert_eq!(
        (knobs.sampler, knobs.prefetch, cell.window()),
        (SamplerKind::Shuffled, 2, WindowChoice::Diffusion)
    );
    assert_eq!(config.run.tolerance, Tolerance(10.0));
    let spec = cell.spec(Path::new("/data"), None);
    assert_eq!((spec.config.workers, spec.config.batch_size), (2, 16));
    assert_eq!(spec.config.cache_bytes, 0);
    let cached = "[[cell]]\nname = \"c\"\nworkers = 1\nbatch = 4\ncache = \"1GiB\"\n";
    let cached = parse(&format!("{DATASET}{cached}")).unwrap();
    assert_eq!(cached.cells[0].spec(Path::new("/data"), None).config.cache_bytes, 1 << 30);
    // Any knob of the loader's table, e.g. the one added last.
    let dropped = "[[cell]]\nname = \"d\"\nworkers = 1\nbatch = 4\ndrop_n_last_frames = 3\n";
    let config = parse(&format!("{DATASET}{dropped}")).unwrap();
    let spec = config.cells[0].spec(Path::new("/data"), None);
    assert_eq!(spec.config.drop_n_last_frames, Some(3));
}

#[test]
fn bad_configs_are_named() {
    let none = parse(DATASET).unwrap_err();
    assert!(none.contains("missing field `cell`"), "{none}");
    let cell = "[[cell]]\nname = \"a\"\nworkers = 0\nbatch = 4\n";
    let twice = parse(&format!("{DATASET}{cell}{cell}")).unwrap_err();
    assert!(twice.contains("\"a\" appears twice"), "{twice}");
    let repeats = parse(&format!("{DATASET}[run]\nrepeats = 2\n{cell}")).unwrap_err();
    assert!(repeats.contains("run.repeats = 2"), "{repeats}");
    let tolerance = parse(&format!("{DATASET}[run]\ntolerance = \"0%\"\n{cell}")).unwrap_err();
    assert!(tolerance.contains("tolerance \"0%\""), "{tolerance}");
    let name = parse(&format!("{DATASET}[[cell]]\nname = \"a b\"\nworkers = 0\nbatch = 4\n"));
    assert!(name.unwrap_err().contains("name \"a b\""));
    let typo = parse(&format!("{DATASET}[[cell]]\nname = \"a\"\nworker = 0\nbatch = 4\n"));
    assert!(typo.unwrap_err().contains("unknown field `worker`"));
    let missing = parse(&format!("{DATASET}[[cell]]\nname = \"m\"\nworkers = 1\n"));
    assert!(missing.unwrap_err().contains("missing field `batch`"));
}

#[test]
fn a_cells_step_is_a_stand_in_declared_as_every_front_end_declares_one() {
    let cell = |keys: &str| {
        parse(&format!("{DATASET}[[cell]]\nname = \"s\"\nworkers = 0\nbatch = 4\n{keys}"))
    };
    // Every key of the step's declaration is a cell's own, not a knob.
    assert!(StepDeclaration::KEYS.iter().all(|k| GuardKnobs::OWN_KEYS.contains(k)));
    let timed = cell("step_ms = 40\nmin_au = 90\n").unwrap();
    let stand_in = timed.cells[0].stand_in().unwrap().unwrap();
    assert_eq!(stand_in.spec().to_string(), "synthetic:40ms");
    assert_eq!(stand_in.device, DeviceChoice::Cpu);
    let refused = [
        ("device = \"cuda\"\nstep_ms = 4\n", "device is not a key of a guard cell"),
        ("threads = 2\n", "threads is not a key of a guard cell"),
        ("step = \"synthetic:4ms\"\nstep_ms = 4\n", "step and step_ms are two steps"),
        ("step_ms = -1\n", "cell \"s\": step_ms -1: expected a step time in ms above 0"),
        ("step_from = \"/no/such/log\"\n", "cell \"s\": step_from /no/such/log: "),
        ("min_au = 90\n", "min_au needs a step to feed"),
    ];
    for (keys, said) in refused {
        let error = cell(keys).unwrap_err();
        assert!(error.contains(said), "{keys}: {error}");
    }
}

#[test]
fn lerobots_loaders_take_their_keys_and_nothing_their_run_sets() {
    let cell =
        |keys: &str| format!("{DATASET}[[cell]]\nname = \"r\"\nworkers = 2\nbatch = 8\n{keys}");
    let run = "loader = \"lerobot-train\"\nlerobot_train = \"--policy.type=act\"\n";
    let config = parse(&cell(&format!("{run}prefetch = 4\npython = \"/venv/bin/python\"\n")));
    let config = config.unwrap();
    let read = &config.cells[0];
    assert_eq!((read.loader, read.knobs.config().prefetch), (LoaderBackend::LerobotTrain, 4));
    // Written back as read, and equal to itself read again (a baseline's cell).
    let again: GuardCell = toml::from_str(&toml::to_string(read).unwrap()).unwrap();
    assert_eq!(&again, read);
    let refused = [
        ("loader = \"lerobot-train\"\n", "add lerobot_train = \"ARGS\""),
        (
            &format!("{run}window = \"none\"\n"),
            "window is not a key of a loader = \"lerobot-train\"",
        ),
        (&format!("{run}images = \"u8\"\n"), "images is the lerobot-train run's to set"),
        (&format!("{run}sampler = \"sequential\"\n"), "sampler is the lerobot-train run's"),
        (
            "loader = \"feedbench-lerobot-train\"\nlerobot_train = \"act\"\n",
            "\"act\": expected lerobot-train's arguments",
        ),
        ("python = \"/venv/bin/python\"\n", "python is not a key of a loader = \"native\""),
        (
            "lerobot_train = \"--policy.type=act\"\n",
            "lerobot_train is not a key of a loader = \"native\"",
        ),
        ("loader = \"lerobot\"\ncache = \"1GiB\"\n", "cache is not a knob of lerobot"),
    ];
    for (keys, expected) in refused {
        let error = parse(&cell(keys)).unwrap_err();
        assert!(error.contains("cell \"r\": ") && error.contains(expected), "{keys}: {error}");
    }
    let listed = "[dataset]\npath = \"/d\"\nepisodes = \"1,2\"\n";
    let error = parse(&cell(run).replace(DATASET, listed)).unwrap_err();
    assert!(error.contains("give --dataset.episodes in lerobot_train"), "{error}");
    // A native cell's window left out is the default it had when written out.
    let native: GuardCell = toml::from_str("name = \"n\"\nworkers = 0\nbatch = 4\n").unwrap();
    let written: GuardCell =
        toml::from_str("name = \"n\"\nwindow = \"diffusion\"\nworkers = 0\nbatch = 4\n").unwrap();
    assert_eq!(native, written);
}

#[test]
fn tolerances_read_with_or_without_percent() {
    assert_eq!("10%".parse::<Tolerance>(), Ok(Tolerance(10.0)));
    assert_eq!(" 2.5 ".parse::<Tolerance>(), Ok(Tolerance(2.5)));
    assert!("-1%".parse::<Tolerance>().is_err() && "ten".parse::<Tolerance>().is_err());
}

#[test]
fn the_shipped_config_parses() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/guard.toml");
    let config = GuardConfig::load(&shipped).unwrap();
    assert!(config.dataset.synth.is_some() && !config.cells.is_empty());
}
