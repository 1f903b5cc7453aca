use super::*;

fn parse(text: &str) -> Result<SweepConfig, String> {
    let config: SweepConfig = toml::from_str(text).map_err(|e| e.to_string())?;
    config.check(Path::new("sweep.toml")).map_err(|e| e.to_string())?;
    Ok(config)
}

#[test]
fn defaults_fill_what_is_left_out() {
    let config = parse("[dataset]\nsynth = \"pusht\"\nepisodes = 4\n").unwrap();
    let knobs = &config.loader.knobs;
    assert_eq!(knobs.typed(&LoaderKnob::WORKERS, |c| c.workers), [0, 1, 2]);
    assert_eq!(knobs.values(&LoaderKnob::DECODER_THREADS), ["1"]);
    assert_eq!(knobs.values(&LoaderKnob::CACHE), ["0"]);
    assert_eq!(knobs.values(&LoaderKnob::DROP_N_LAST_FRAMES), ["window"]);
    // The knobs added later are left out at their defaults, so that a config kept before
    // they existed reads and compares the same, key for key.
    let text = toml::to_string(&config.loader).unwrap();
    assert_eq!(
        text,
        "window = \"diffusion\"\nworkers = [0, 1, 2]\nprefetch = [2]\nbatch = [16, 64]\n\
         resolution = [\"native\"]\nimages = [\"f32\"]\nsampler = \"episode-aware\"\n\
         seed = 0\n"
    );
    let cached = parse("[dataset]\nsynth = \"pusht\"\n[loader]\ncache = [\"none\", \"1.5GB\"]\n");
    let cached = cached.unwrap();
    let budgets = cached.loader.knobs.typed(&LoaderKnob::CACHE, |c| c.cache_bytes);
    assert_eq!(budgets, [0, 1_500_000_000]);
    let text = toml::to_string(&cached).unwrap();
    assert!(text.contains("cache = [\"0\", \"1.5GB\"]"), "{text}");
    let bad = parse("[dataset]\nsynth = \"pusht\"\n[loader]\ncache = [\"lots\"]\n");
    let bad = bad.unwrap_err();
    assert!(bad.contains("cache") && bad.contains("expected a size"), "{bad}");
    assert_eq!(config.model.declared.preset, crate::model::DiffusionPreset::Auto);
    assert_eq!(config.dataset.episodes, Some(EpisodeChoice::Count(4)));
    assert_eq!(config.run.repeats, 1);
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let typo = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nworker = [1]\n").unwrap_err();
    assert!(typo.contains("unknown field `worker`"), "{typo}");
    let both = parse("[dataset]\nsynth = \"pusht\"\npath = \"x\"\n").unwrap_err();
    assert!(both.contains("exactly one"), "{both}");
    let res = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nresolution = [\"96\"]\n");
    let res = res.unwrap_err();
    assert!(res.contains("loader.resolution \"96\"") && res.contains("expected HxW"), "{res}");
    let sampler = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nsampler = \"random\"\n");
    let sampler = sampler.unwrap_err();
    assert!(sampler.contains("expected sequential, shuffled, episode-aware"), "{sampler}");
    let list = parse("[dataset]\npath = \"x\"\nepisodes = 3\n").unwrap_err();
    assert!(list.contains("is a list"), "{list}");
    let zero = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nbatch = [16, 0]\n").unwrap_err();
    assert!(zero.contains("loader.batch 0: expected at least 1"), "{zero}");
    let list = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nseed = [1, 2]\n").unwrap_err();
    assert!(list.contains("loader.seed takes one value"), "{list}");
    let empty = parse("[dataset]\nsynth = \"pusht\"\n[loader]\nprefetch = []\n").unwrap_err();
    assert!(empty.contains("loader.prefetch is an empty list"), "{empty}");
    let typo = parse("[dataset]\nsynth = \"pusht\"\n[model]\nstep_form = \"f\"\n");
    let typo = typo.unwrap_err();
    assert!(typo.contains("model.step_form: unknown field") && typo.contains("step_from"));
    let both = parse("[dataset]\nsynth = \"pusht\"\n[model]\nstep_ms = 4\nstep_from = \"f\"\n");
    let both = both.unwrap_err();
    assert!(both.contains("model.step_ms and model.step_from are two steps"), "{both}");
    let threads = parse("[dataset]\nsynth = \"pusht\"\n[model]\nthreads = 0\n").unwrap_err();
    assert!(threads.contains("model.threads must be ≥ 1"), "{threads}");
    let absent = parse("[dataset]\nsynth = \"pusht\"\n[run]\ntrace_cell = \"3,16\"\n");
    assert!(absent.unwrap_err().contains("no cell has 3 workers and batch 16"));
    let cell = parse("[dataset]\nsynth = \"pusht\"\n[run]\ntrace_cell = \"2\"\n").unwrap_err();
    assert!(cell.contains("workers,batch"), "{cell}");
}

#[test]
fn the_shipped_configs_parse() {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    for name in ["default.toml", "g1.toml", "g1-partial.toml", "example.toml"] {
        let config = SweepConfig::load(&configs.join(name)).unwrap();
        assert_eq!(config.dataset.synth.is_some(), config.dataset.path.is_none(), "{name}");
    }
    let default = SweepConfig::load(&configs.join("default.toml")).unwrap();
    let knobs = &default.loader.knobs;
    assert_eq!(knobs.values(&LoaderKnob::WORKERS), ["0", "1", "2"]);
    assert_eq!(knobs.values(&LoaderKnob::BATCH), ["16", "64"]);
}

#[test]
fn load_names_the_file_and_resolves_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.toml");
    std::fs::write(&file, "[dataset]\npath = \"data/ds\"\n").unwrap();
    let config = SweepConfig::load(&file).unwrap();
    assert_eq!(config.dataset.path, Some(dir.path().join("data/ds")));
    std::fs::write(&file, "[dataset]\npath = 3\n").unwrap();
    let error = SweepConfig::load(&file).unwrap_err().to_string();
    assert!(error.starts_with(&file.display().to_string()), "{error}");
}

#[test]
fn a_lerobot_train_loader_needs_the_runs_arguments_and_keeps_them() {
    let text = "[dataset]\nsynth = \"pusht\"\n[loader]\nloader = [\"native\", \"lerobot-train\"]\n";
    let missing = parse(text).unwrap_err();
    assert!(missing.contains("no loader.lerobot_train: give the run's arguments"), "{missing}");
    let given = format!("{text}lerobot_train = \"--policy.type=act --dataset.root=/d\"\n");
    let config = parse(&given).unwrap();
    assert_eq!(config.loader.loader, [LoaderBackend::Native, LoaderBackend::LerobotTrain]);
    let kept: SweepConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
    assert_eq!(kept, config, "the kept config reads back the same");
}
