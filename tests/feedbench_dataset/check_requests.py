"""The three requests the reader's checks read a dataset with, from its info.json (no LeRobot
needed): tests/feedbench_dataset/check.py compares them with LeRobot's items, and
tests/wheel/batches_file.py between two environments."""

import json


def requests(root):
    """(name, keyword arguments of FeedbenchDataset and LeRobotDataset): a diffusion-like window
    in uint8, no window in float32, the last two episodes with a window per modality (the
    cameras' history of three frames, the state's of one, as LeRobot main's
    image_observation_delta_indices and state_observation_delta_indices give them)."""
    info = json.loads((root / "meta" / "info.json").read_text())
    fps = info["fps"]
    observations = [key for key in info["features"] if key.startswith("observation.")]
    window = {key: [-1 / fps, 0.0] for key in observations}
    window["action"] = [i / fps for i in range(-1, 15)]
    cameras = {key for key in observations if info["features"][key]["dtype"] in ("video", "image")}
    per_modality = {key: [-2 / fps, -1 / fps, 0.0] if key in cameras else [0.0]
                    for key in observations}
    per_modality["action"] = [0.0, 1 / fps]
    episodes = list(range(info["total_episodes"]))[-2:]
    return [
        ("window, uint8", {"delta_timestamps": window, "return_uint8": True}),
        ("no window, float32", {}),
        (f"episodes {episodes}, a window per modality",
         {"delta_timestamps": per_modality, "episodes": episodes, "return_uint8": True}),
    ]
