"""Audit targets for the tests: a minimal correct one and one per way of breaking the protocol."""

from __future__ import annotations

import time

from pmark_theory.infra.plugins import plugin

SENTENCE = "cat a!"


class Fixed:
    """Always the same sentence; a detector that returns ``value`` (a valid p-value by default)."""

    claims = ("reproducible",)

    def __init__(self, value=0.5, raise_in=None, sleep_in=None):
        self.value = value
        self.raise_in = raise_in
        self.sleep_in = sleep_in

    def generate(self, prompt, key, seed, sentences):
        if self.raise_in == "generate":
            raise RuntimeError("boom in generate")
        if self.sleep_in == "generate":
            time.sleep(3)
        return " ".join([SENTENCE] * sentences)

    def detect(self, text, key):
        if self.raise_in == "detect":
            raise ZeroDivisionError("boom in detect")
        if self.sleep_in == "detect":
            time.sleep(3)
        return self.value


@plugin("audit_target")
def fixed(env):
    return Fixed()


@plugin("audit_target")
def nan_detect(env):
    return Fixed(value=float("nan"))


@plugin("audit_target")
def p_above_one(env):
    return Fixed(value=1.5)


@plugin("audit_target")
def string_detect(env):
    return Fixed(value="0.3")


@plugin("audit_target")
def raises_generate(env):
    return Fixed(raise_in="generate")


@plugin("audit_target")
def raises_detect(env):
    return Fixed(raise_in="detect")


@plugin("audit_target")
def hangs_detect(env):
    return Fixed(sleep_in="detect")


class NoDetect:
    def generate(self, prompt, key, seed):
        return SENTENCE


@plugin("audit_target")
def no_detect(env):
    return NoDetect()


@plugin("audit_target")
def bad_claim(env):
    t = Fixed()
    t.claims = ("distortion-free", "unbiased")
    return t


@plugin("audit_target")
def factory_raises(env):
    raise ImportError("missing dependency foo")


def unregistered(env):
    return Fixed()
