/**
 * The `meter` option of the instrumentations: the Meter given, or the default one OpenTelemetry instrumentations use.
 *
 * Source: extension (OpenTelemetry instrumentations default to the global MeterProvider, with the library's name and
 * version as the instrumentation scope).
 */
import { metrics, type Meter } from '@opentelemetry/api';
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
  const given = optionValue(options, 'meter');
  const meter = given === undefined ? metrics.getMeter(DRIVER_INFO.name, DRIVER_INFO.version) : given;
  if (meter === null || typeof meter !== 'object' || uses.some((method) => typeof meter[method] !== 'function')) {
    throw new InvalidOptionError('meter', meter, 'an OpenTelemetry Meter (e.g. metrics.getMeter(name) of @opentelemetry/api)');
  }
  return meter;
}
