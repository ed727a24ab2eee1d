"""OPD losses: closed form, the estimators against it, and the multi-teacher merge."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.algorithms.distill import DISTILL_LOSSES, merge_teachers


def _lp(probs) -> torch.Tensor:
    return torch.tensor([probs], dtype=torch.float64).log()


def test_full_reverse_kl_equals_the_closed_form():
    """p_s = (0.5, 0.3, 0.2), p_t = (0.2, 0.5, 0.3):
    KL(s||t) = 0.5 ln 2.5 + 0.3 ln 0.6 + 0.2 ln(2/3) = 0.458145 - 0.153248 - 0.081093 = 0.223804."""
    out = DISTILL_LOSSES.get("full")(_lp([0.5, 0.3, 0.2]), _lp([0.2, 0.5, 0.3]), torch.tensor([0]), 0)
    expected = 0.5 * math.log(2.5) + 0.3 * math.log(0.6) + 0.2 * math.log(2 / 3)
    assert out.loss_N.item() == pytest.approx(expected, abs=1e-12)
    assert out.loss_N.item() == pytest.approx(0.223804, abs=1e-6)
    same = DISTILL_LOSSES.get("full")(_lp([0.5, 0.3, 0.2]), _lp([0.5, 0.3, 0.2]), torch.tensor([0]), 0)
    assert same.loss_N.item() == pytest.approx(0.0, abs=1e-15)


def _random(n: int, V: int, seed: int, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    s = torch.log_softmax(torch.randn(n, V, generator=g, dtype=torch.float64) * scale, -1)
    t = torch.log_softmax(torch.randn(n, V, generator=g, dtype=torch.float64) * scale, -1)
    return s, t


def test_topk_is_a_kl_with_the_teacher_as_its_minimum():
    """top-k + tail is a KL over k + 1 outcomes: >= 0 for any pair; exactly 0, with zero gradient, at
    student = teacher for k < V; equal to the full reverse KL at k = V."""
    s, t = _random(16, 50, 0)
    full = DISTILL_LOSSES.get("full")(s, t, None, 0).kl_N
    assert torch.allclose(DISTILL_LOSSES.get("topk")(s, t, None, 50).kl_N, full, atol=1e-12)
    for k in (1, 5, 20, 49):
        assert bool((DISTILL_LOSSES.get("topk")(s, t, None, k).kl_N >= -1e-12).all()), k
        logits = t.clone().requires_grad_()  # the student's logits, at the teacher
        out = DISTILL_LOSSES.get("topk")(torch.log_softmax(logits, -1), t, None, k)
        out.loss_N.sum().backward()
        assert out.kl_N.abs().max() < 1e-12 and logits.grad.abs().max() < 1e-12, k


def test_topk_descent_matches_the_teacher_on_its_top_k_and_the_tail_mass():
    """Gradient descent on a 6-token student from a random start, k = 2: the student ends with the
    teacher's probabilities on the teacher's top 2 and the teacher's total mass on the other 4 (how
    it spreads those 4 is free). The student-top-k sum without a tail term this replaces instead
    drifted towards uniform with a negative loss."""
    gen = torch.Generator().manual_seed(5)
    teacher = torch.log_softmax(torch.randn(1, 6, dtype=torch.float64, generator=gen) * 2, -1)
    logits = torch.randn(1, 6, dtype=torch.float64, generator=gen).requires_grad_()
    opt = torch.optim.SGD([logits], lr=0.5)
    for _ in range(3000):
        opt.zero_grad()
        DISTILL_LOSSES.get("topk")(torch.log_softmax(logits, -1), teacher, None, 2).loss_N.sum().backward()
        opt.step()
    student = torch.softmax(logits.detach(), -1)[0]
    p_t = teacher.exp()[0]
    top = p_t.topk(2).indices
    torch.testing.assert_close(student[top], p_t[top], atol=1e-6, rtol=0)
    torch.testing.assert_close(1 - student[top].sum(), 1 - p_t[top].sum(), atol=1e-6, rtol=0)


def test_sampled_estimate_converges_to_full_kl():
    """The mean of log p_s(x) - log p_t(x) over x ~ p_s is an unbiased estimate of the reverse KL:
    with 200k samples it lands within 4 standard errors."""
    s, t = _random(1, 20, 1)
    g = torch.Generator().manual_seed(2)
    x = torch.multinomial(s.exp()[0], 200_000, replacement=True, generator=g)
    est = DISTILL_LOSSES.get("sampled")(s.expand(len(x), -1), t.expand(len(x), -1), x, 0).kl_N
    full = DISTILL_LOSSES.get("full")(s, t, None, 0).kl_N.item()
    assert abs(est.mean().item() - full) < 4 * est.std().item() / math.sqrt(len(x))


def test_sampled_gradient_is_the_full_gradient_in_expectation():
    """sum_x p_s(x) grad[sg(s_x - t_x) s_x] = sum_x p_s(x) (s_x - t_x) grad s_x = grad KL, exactly
    (the dropped term sum_x p_s(x) grad s_x is grad sum_x p_s(x) = 0). Checked by enumerating x."""
    V = 7
    logits = torch.randn(1, V, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    t = torch.log_softmax(torch.randn(1, V, dtype=torch.float64, generator=torch.Generator().manual_seed(4)), -1)
    s = torch.log_softmax(logits, -1)
    (full_grad,) = torch.autograd.grad(DISTILL_LOSSES.get("full")(s, t, None, 0).loss_N.sum(), logits)
    expected = torch.zeros_like(logits)
    for x in range(V):
        s = torch.log_softmax(logits, -1)
        (g,) = torch.autograd.grad(DISTILL_LOSSES.get("sampled")(s, t, torch.tensor([x]), 0).loss_N.sum(), logits)
        expected += s.exp()[0, x].detach() * g
    assert torch.allclose(expected, full_grad, atol=1e-12)


def test_forward_kl_closed_form_and_it_reports_the_reverse_kl():
    """p_s = (0.5, 0.3, 0.2), p_t = (0.2, 0.5, 0.3):
    KL(t||s) = 0.2 ln 0.4 + 0.5 ln(5/3) + 0.3 ln 1.5 = -0.183258 + 0.255413 + 0.121640 = 0.193795;
    its metric is the reverse KL of the first test (0.223804), so `opd_kl` compares across losses."""
    out = DISTILL_LOSSES.get("forward")(_lp([0.5, 0.3, 0.2]), _lp([0.2, 0.5, 0.3]), torch.tensor([0]), 0)
    expected = 0.2 * math.log(0.4) + 0.5 * math.log(5 / 3) + 0.3 * math.log(1.5)
    assert out.loss_N.item() == pytest.approx(expected, abs=1e-12)
    assert out.loss_N.item() == pytest.approx(0.193795, abs=1e-6)
    assert out.kl_N.item() == pytest.approx(0.223804, abs=1e-6)


def test_forward_kl_gradient_is_student_minus_teacher():
    """d/dz sum_v p_t (log p_t - log_softmax(z)_v) = softmax(z) - p_t. The reverse KL's gradient,
    p_s (log p_s - log p_t - KL), is near 0 on a token the student gives almost no mass, the forward
    one is near -p_t there: (student, teacher) = (0.02, 0.68) on the calculator's second-call token."""
    logits = torch.tensor([[math.log(0.02), math.log(0.90), math.log(0.08)]], dtype=torch.float64, requires_grad=True)
    t = _lp([0.68, 0.30, 0.02])
    s = torch.log_softmax(logits, -1)
    (fwd,) = torch.autograd.grad(DISTILL_LOSSES.get("forward")(s, t, None, 0).loss_N.sum(), logits)
    assert torch.allclose(fwd, s.exp().detach() - t.exp(), atol=1e-12)
    s = torch.log_softmax(logits, -1)
    (rev,) = torch.autograd.grad(DISTILL_LOSSES.get("full")(s, t, None, 0).loss_N.sum(), logits)
    assert fwd[0, 0].item() == pytest.approx(-0.66, abs=1e-9)
    assert -0.2 < rev[0, 0].item() < 0  # same direction, a fraction of the push


@pytest.mark.parametrize("rule", ["logits", "probs"])
def test_identical_teachers_merge_to_the_teacher(rule):
    _, t = _random(4, 30, 5)
    merged = merge_teachers([t, t.clone(), t.clone()], [0.2, 0.5, 0.3], rule)
    assert torch.allclose(merged, t, atol=1e-12)


def test_merge_rules_by_hand():
    """Two teachers on V = 2, weights (3, 1) -> (0.75, 0.25). probs: 0.75 p_a + 0.25 p_b.
    logits: normalize p_a^0.75 p_b^0.25."""
    a, b = _lp([0.9, 0.1]), _lp([0.5, 0.5])
    probs = merge_teachers([a, b], [3, 1], "probs").exp()
    assert torch.allclose(probs, torch.tensor([[0.75 * 0.9 + 0.25 * 0.5, 0.75 * 0.1 + 0.25 * 0.5]], dtype=torch.float64))
    geo = torch.tensor([[0.9**0.75 * 0.5**0.25, 0.1**0.75 * 0.5**0.25]], dtype=torch.float64)
    assert torch.allclose(merge_teachers([a, b], [3, 1], "logits").exp(), geo / geo.sum())
    with pytest.raises(KeyError, match="known: logits, probs"):
        merge_teachers([a, b], [1, 1], "median")
