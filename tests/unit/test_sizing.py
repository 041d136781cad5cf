"""Admission control: micro-batches sized to about a second of data at the measured rate."""

from mm2py.source.plan.sizing import FIRST_BATCH_BYTES, MIN_BATCH_BYTES, BatchSizer

MB = 1 << 20


def test_budget_follows_one_second_at_the_measured_rate_up_at_once_down_halfway():
    sizer = BatchSizer(ceiling=2048 * MB, duration_s=1.0)
    assert sizer.next_budget(0.0) == FIRST_BATCH_BYTES == 512 * MB
    sizer.planned(0.0, FIRST_BATCH_BYTES, FIRST_BATCH_BYTES)
    assert sizer.next_budget(3.0) == FIRST_BATCH_BYTES, "the first batch (start-up) measures nothing"
    sizer.planned(3.0, FIRST_BATCH_BYTES, FIRST_BATCH_BYTES)
    # the full 512 MB batch took 0.5 s: 1024 MB/s
    assert sizer.next_budget(3.5) == 1024 * MB
    assert sizer.next_budget(3.5) == 1024 * MB, "no full batch since: nothing new measured"
    sizer.planned(4.0, 1024 * MB, 1024 * MB)
    assert sizer.next_budget(8.0) == (1024 + 256) // 2 * MB  # 4 s for 1024 MB: down halfway


def test_a_batch_smaller_than_its_budget_measures_nothing():
    sizer = BatchSizer(ceiling=512 * MB, duration_s=1.0)
    budget = sizer.next_budget(0.0)
    sizer.planned(0.0, budget, budget)
    sizer.next_budget(5.0)
    sizer.planned(5.0, 1 * MB, budget)  # caught up: only 1 MB had arrived
    assert sizer.next_budget(10.0) == budget


def test_budget_stays_within_floor_and_ceiling():
    sizer = BatchSizer(ceiling=100 * MB, duration_s=1.0)
    assert sizer.next_budget(0.0) == 100 * MB, "the first budget is within the ceiling too"
    sizer.planned(0.0, sizer.budget, int(sizer.budget))  # the first, not measured
    for i in range(10):
        sizer.planned(i, sizer.budget, int(sizer.budget))
        assert sizer.next_budget(i + 0.01) <= 100 * MB  # 100x faster than a second's worth
    assert sizer.budget == 100 * MB
    for i in range(10, 30):
        sizer.planned(i, sizer.budget, int(sizer.budget))
        assert sizer.next_budget(i + 100.0) >= MIN_BATCH_BYTES  # very slow
    assert sizer.budget == MIN_BATCH_BYTES


def test_duration_zero_is_always_the_ceiling():
    sizer = BatchSizer(ceiling=128 * MB, duration_s=0)
    sizer.planned(0.0, 128 * MB, 128 * MB)
    assert sizer.next_budget(5.0) == 128 * MB


def _run(sizer: BatchSizer, fixed: float, per_mb: float, batches: int) -> list[int]:
    """Full batches through a flow whose cycle takes ``fixed + MB * per_mb`` seconds; their budgets."""
    now, budgets = 0.0, []
    for _ in range(batches):
        budget = sizer.next_budget(now)
        budgets.append(budget)
        sizer.planned(now, budget, budget)
        now += fixed + budget / MB * per_mb
    return budgets


def test_a_fixed_cost_above_the_duration_does_not_shrink_batches_to_the_floor():
    """5,000 partitions: 2 s per micro-batch besides the data, 100 MB/s of copying."""
    sizer = BatchSizer(ceiling=1024 * MB, duration_s=1.0)
    budgets = _run(sizer, fixed=2.0, per_mb=0.01, batches=30)
    assert abs(sizer.fixed_s - 2.0) < 0.05
    # data for three times the fixed part (6 s at 100 MB/s): three quarters of every cycle copy
    assert all(abs(b - 600 * MB) < 30 * MB for b in budgets[-10:]), [b // MB for b in budgets]
    rate = budgets[-1] / MB / (2.0 + budgets[-1] / MB * 0.01)
    assert rate > 70, f"{rate:.0f} MB/s; at the floor's 16 MB it would be {16 / 2.16:.0f}"


def test_batches_stop_at_the_ceiling_however_large_the_fixed_cost():
    sizer = BatchSizer(ceiling=256 * MB, duration_s=1.0)
    budgets = _run(sizer, fixed=2.0, per_mb=0.01, batches=30)
    assert max(budgets) == 256 * MB and budgets[-1] == 256 * MB


def test_a_small_fixed_cost_leaves_a_duration_of_data_per_batch():
    sizer = BatchSizer(ceiling=512 * MB, duration_s=1.0)
    budgets = _run(sizer, fixed=0.1, per_mb=0.01, batches=30)  # 3 x 0.1 s < 1 s: the duration rules
    assert abs(sizer.fixed_s - 0.1) < 0.02
    assert all(abs(b - 100 * MB) < 5 * MB for b in budgets[-10:]), [b // MB for b in budgets]
