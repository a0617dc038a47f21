"""Dates and timestamps parsed by TensorFlow ops in Transform's graph, so training and the serving graph read a
date string the same way; the formats are trainer/date_formats.py's."""

from __future__ import annotations

import tensorflow as tf

from trainer.date_formats import FORMATS


def parse(strings: tf.Tensor, fmt: str) -> dict[str, tf.Tensor]:
    """[batch] strings -> days since 1970-01-01 (float, NaN when not a date of `fmt`), and day of week
    (Monday 0), month (0-11) and hour (0-23) as int64, -1 when not a date."""
    pattern, order = FORMATS[fmt]
    strings = tf.strings.strip(strings)
    numbers = tf.strings.split(tf.strings.strip(tf.strings.regex_replace(strings, r"[^0-9]+", " ")))
    numbers = numbers.to_tensor(default_value="0", shape=[None, 4])
    numbers = tf.strings.to_number(tf.where(numbers == "", "0", numbers), tf.int64)
    y, m, d = (numbers[:, order.index(k)] for k in "ymd")
    zero = tf.zeros_like(y)
    hour = tf.where(tf.strings.regex_full_match(strings, r".*\d[T ]\d{1,2}:\d{2}.*"), numbers[:, 3], zero)
    pm = tf.strings.regex_full_match(strings, r".*[Pp][Mm]\s*")
    am = tf.strings.regex_full_match(strings, r".*[Aa][Mm]\s*")
    hour = tf.where(pm & (hour < 12), hour + 12, tf.where(am & (hour == 12), zero, hour))
    ok = tf.strings.regex_full_match(strings, pattern) & (m >= 1) & (m <= 12) & (d >= 1) & (d <= 31) & (hour <= 23)
    days = days_from_civil(y, tf.clip_by_value(m, 1, 12), d)
    missing = tf.constant(-1, tf.int64)
    return {
        "days": tf.where(ok, tf.cast(days, tf.float32), float("nan")),
        "day_of_week": tf.where(ok, (days + 3) % 7, missing),  # 1970-01-01 was a Thursday
        "month": tf.where(ok, m - 1, missing),
        "hour": tf.where(ok, hour, missing),
    }


def days_from_civil(y, m, d):
    """Days since 1970-01-01 of the proleptic Gregorian date (H. Hinnant's days_from_civil, integer ops only)."""
    y = y - tf.cast(m <= 2, y.dtype)
    era = tf.math.floordiv(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + tf.where(m > 2, -3 * tf.ones_like(m), 9 * tf.ones_like(m))) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468
