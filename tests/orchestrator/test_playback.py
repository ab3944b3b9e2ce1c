import numpy as np

from fdeval.orchestrator.playback import Playback


def test_chunk_starts_at_max_of_arrival_and_previous_end():
    pb = Playback(1000)
    a = pb.add(np.ones(100, np.float32), arrival_s=0.05)
    b = pb.add(np.ones(100, np.float32), arrival_s=0.06)  # arrives while a is still playing: queued
    c = pb.add(np.ones(10, np.float32), arrival_s=0.5)  # arrives after a gap: starts on arrival
    assert (a.play_start_s, b.play_start_s, c.play_start_s) == (0.05, 0.15, 0.5)
    track = pb.track(600)
    assert track[:50].sum() == 0 and track[50:250].sum() == 200 and track[250:500].sum() == 0


def test_flush_drops_only_unplayed_audio():
    pb = Playback(1000)
    pb.add(np.ones(500, np.float32), arrival_s=0.0)
    played = pb.render_to(200)
    assert played.sum() == 200
    f = pb.flush(0.1)  # asked to flush in the past: what was rendered stays
    assert f.t_s == 0.2 and f.n_dropped == 300
    assert pb.track(500)[200:].sum() == 0
    nxt = pb.add(np.ones(10, np.float32), arrival_s=0.0)
    assert nxt.play_start_s == 0.2  # never before what was already heard


def test_render_is_chunking_independent():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)

    def rendered(cuts):
        pb = Playback(1000)
        pb.add(x, 0.0)
        return np.concatenate([pb.render_to(n) for n in cuts])

    assert np.array_equal(rendered([1000]), rendered(list(range(27, 1000, 27)) + [1000]))
