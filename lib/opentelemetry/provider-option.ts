/**
 * The `meter` and `tracer` options of the instrumentations: the Meter or Tracer given, or the default one
 * OpenTelemetry instrumentations use.
 *
 * Source: extension (OpenTelemetry instrumentations default to the global MeterProvider and TracerProvider, with the
 * library's name and version as the instrumentation scope); MongoDB OpenTelemetry spec, "Tracer Attributes" (the
 * driver's name, and its version as the handshake's `client.driver.version` gives it).
 */
import { metrics, trace, type Meter, type Tracer } from '@opentelemetry/api';
import { InvalidOptionError } from '../errors';
import { optionValue } from '../options';
import { DRIVER_INFO } from '../version';

/**
 * The Meter of `options.meter`: `metrics.getMeter('rxcmap', <version>)` when it is missing (only then: a null one is
 * refused like any other value that is not a Meter, rather than sending the metrics to the global MeterProvider
 * unseen), else the value given, which must have each method of `uses` (the instrumentation's own needs).
 *
 * @throws {InvalidOptionError} (option `meter`) for a value that is not an object with those methods.
 */
export function meterOption(options: { meter?: Meter | undefined }, uses: readonly (keyof Meter)[]): Meter {
  return providedOption(options, 'meter', () => metrics.getMeter(DRIVER_INFO.name, DRIVER_INFO.version), uses, 'an OpenTelemetry Meter (e.g. metrics.getMeter(name) of @opentelemetry/api)');
}

/**
 * The Tracer of `options.tracer`: `trace.getTracer('rxcmap', <version>)` when it is missing (only then, as for
 * {@link meterOption}), else the value given, which must have each method of `uses`.
 *
 * @throws {InvalidOptionError} (option `tracer`) for a value that is not an object with those methods.
 */
export function tracerOption(options: { tracer?: Tracer | undefined }, uses: readonly (keyof Tracer)[]): Tracer {
  return providedOption(options, 'tracer', () => trace.getTracer(DRIVER_INFO.name, DRIVER_INFO.version), uses, 'an OpenTelemetry Tracer (e.g. trace.getTracer(name) of @opentelemetry/api)');
}

/** Option `name` of `options`, `byDefault()` when missing; refused unless an object with each method of `uses`. */
function providedOption<K extends string, T extends object>(options: { [key in K]?: T | undefined }, name: K, byDefault: () => T, uses: readonly (keyof T)[], allowed: string): T {
  const given = optionValue(options, name) as T | undefined;
  const value: unknown = given === undefined ? byDefault() : given;
  if (value === null || typeof value !== 'object' || uses.some((method) => typeof (value as T)[method] !== 'function')) {
    throw new InvalidOptionError(name, value, allowed);
  }
  return value as T;
}
