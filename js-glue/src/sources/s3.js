// An object in an S3-compatible bucket (Cloudflare R2 in production), addressed as
// s3://bucket/key or r2://bucket/key and read through the HTTP source with SigV4-signed requests.
import { AwsClient } from 'aws4fetch';
import { HttpSource, ObjectSourceError } from './http.js';

function pick(env, ...names) {
  for (const name of names) if (env[name]) return env[name];
  return undefined;
}

/**
 * Endpoint, credentials and region from options, else the environment (S3_ENDPOINT / R2_ENDPOINT,
 * AWS_ACCESS_KEY_ID / R2_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY / R2_SECRET_ACCESS_KEY, AWS_REGION);
 * the region defaults to "auto", R2's.
 * @example const config = s3Config({ endpoint: 'https://acct.r2.cloudflarestorage.com' });
 */
export function s3Config(options = {}, env = process.env) {
  const config = {
    endpoint: options.endpoint ?? pick(env, 'S3_ENDPOINT', 'R2_ENDPOINT'),
    accessKeyId: options.accessKeyId ?? pick(env, 'AWS_ACCESS_KEY_ID', 'R2_ACCESS_KEY_ID'),
    secretAccessKey: options.secretAccessKey ?? pick(env, 'AWS_SECRET_ACCESS_KEY', 'R2_SECRET_ACCESS_KEY'),
    region: options.region ?? pick(env, 'AWS_REGION') ?? 'auto',
  };
  // Names only: secrets never reach a message or a log.
  const missing = ['endpoint', 'accessKeyId', 'secretAccessKey'].filter((k) => !config[k]);
  if (missing.length) {
    throw new ObjectSourceError(`S3 source: missing ${missing.join(', ')} (pass them as options or set S3_ENDPOINT/R2_ENDPOINT, AWS_ACCESS_KEY_ID/R2_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY/R2_SECRET_ACCESS_KEY)`, { code: 'no_credentials' });
  }
  return config;
}

/**
 * Opens s3://bucket/key or r2://bucket/key (path-style URL on the endpoint). Takes the HTTP
 * source's retry options too.
 * @example const source = await openS3Source('r2://models/gemma-31b.gguf', { retries: 4 });
 */
export async function openS3Source(url, options = {}) {
  const match = /^(s3|r2):\/\/([^/]+)\/(.+)$/.exec(url);
  if (!match) throw new ObjectSourceError(`${url}: not an s3://bucket/key or r2://bucket/key URL`, { code: 'bad_url' });
  const [, , bucket, key] = match;
  const { endpoint, accessKeyId, secretAccessKey, region } = s3Config(options);
  // retries: 0: the HTTP source retries, and resumes from the byte reached.
  const client = new AwsClient({ accessKeyId, secretAccessKey, region, service: 's3', retries: 0 });
  const objectUrl = `${endpoint.replace(/\/+$/, '')}/${encodeURIComponent(bucket)}/${key.split('/').map(encodeURIComponent).join('/')}`;
  return HttpSource.open(objectUrl, { ...options, name: url, request: (u, init) => client.fetch(u, init) });
}
