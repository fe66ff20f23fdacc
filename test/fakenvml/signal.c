/*
 * Values over time: constants, sines and steps, their integrals (energy is
 * power integrated), and duty patterns (utilization).
 */
#include <math.h>

#include "fakenvml.h"

bool fake_signal_set(const fake_signal *s) { return s->kind != SIG_NONE; }

double fake_signal_at(const fake_signal *s, double t)
{
	switch (s->kind) {
	case SIG_CONST:
		return s->value;
	case SIG_SINE:
		return s->mean + s->amplitude * sin(2 * M_PI * (t + s->phase) / s->period);
	case SIG_STEPS: {
		/* Before the first step, the first value holds. */
		double v = s->steps[0].value;
		for (int i = 0; i < s->nsteps && s->steps[i].at <= t; i++)
			v = s->steps[i].value;
		return v;
	}
	default:
		return 0;
	}
}

double fake_signal_integral(const fake_signal *s, double t)
{
	if (t <= 0)
		return 0;
	switch (s->kind) {
	case SIG_CONST:
		return s->value * t;
	case SIG_SINE: {
		double w = 2 * M_PI / s->period;
		return s->mean * t + s->amplitude / w * (cos(w * s->phase) - cos(w * (t + s->phase)));
	}
	case SIG_STEPS: {
		double sum = 0, from = 0, v = s->steps[0].value;
		for (int i = 0; i < s->nsteps && s->steps[i].at < t; i++) {
			sum += v * (s->steps[i].at - from);
			from = s->steps[i].at;
			v = s->steps[i].value;
		}
		return sum + v * (t - from);
	}
	default:
		return 0;
	}
}

/* Subdivisions of an interval when the busy fraction is integrated. */
#define DUTY_STEPS 240

double fake_duty_fraction(const fake_duty *d, double a, double b)
{
	if (!d->set || b <= a)
		return 0;
	double sum = 0, h = (b - a) / DUTY_STEPS;
	for (int i = 0; i < DUTY_STEPS; i++) {
		double t = a + (i + 0.5) * h;
		double busy = fake_signal_at(&d->busy, t);
		if (busy < 0)
			busy = 0;
		if (busy > 1)
			busy = 1;
		if (d->period <= 0) {
			sum += busy; /* level mode */
			continue;
		}
		double x = fmod(t - d->phase, d->period);
		if (x < 0)
			x += d->period;
		sum += x < busy * d->period ? 1 : 0;
	}
	return sum / DUTY_STEPS;
}
