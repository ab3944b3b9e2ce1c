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


def test_a_flush_counts_what_each_item_played_from_the_play_record():
    pb = Playback(1000)
    pb.add(np.ones(100, np.float32), arrival_s=0.0, item="a")  # plays 0.0-0.1
    pb.add(np.ones(300, np.float32), arrival_s=0.01, item="b")  # queued: 0.1-0.4
    pb.add(np.ones(200, np.float32), arrival_s=0.02, item="b")  # 0.4-0.6
    pb.render_to(250)
    f = pb.flush(0.25)
    assert dict(f.played_n) == {"a": 100, "b": 150} and f.n_dropped == 350
    # what a flush dropped is never counted as played later
    pb.add(np.ones(50, np.float32), arrival_s=0.3, item="c")
    pb.render_to(400)
    assert dict(pb.flush(0.4).played_n) == {"a": 100, "b": 150, "c": 50}


def test_an_item_whose_audio_arrives_after_its_queue_ran_dry_is_a_stall():
    pb = Playback(1000)
    pb.add(np.ones(100, np.float32), arrival_s=0.0, item="a")
    pb.add(np.ones(100, np.float32), arrival_s=0.05, item="a")  # queued: no gap
    assert pb.item_stall_max_n == 0
    pb.add(np.ones(100, np.float32), arrival_s=0.35, item="a")  # 0.15 s after the queue ended
    pb.add(np.ones(100, np.float32), arrival_s=0.9, item="b")  # a new item after silence: no stall
    assert pb.item_stall_max_n == 150
