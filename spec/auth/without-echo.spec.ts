/**
 * withoutEcho: a secret a server quotes back in a refusal (as text, a key, or bytes of a Binary, at any depth) is
 * replaced before the error reaches anyone; the rest of the reply is kept as it was.
 */
import { expect } from 'chai';
import { Binary, ObjectId, type Document } from 'bson';
import { MongoNetworkError, MongoServerError } from '../../lib';
import { withoutEcho } from '../../lib/auth/without-echo';

const SECRET = 'pw-not-to-show';
const refusing = (reply: Document) => async (): Promise<Document> => {
  throw new MongoServerError(reply);
};
const failure = async (work: Promise<unknown>): Promise<MongoServerError> => work.then(() => expect.fail('resolved'), (e: unknown) => e as MongoServerError);

describe('withoutEcho', function () {
  it('with an empty secret is the command runner itself', function () {
    const run = async (): Promise<Document> => ({ ok: 1 });
    expect(withoutEcho(run, '', '<hidden>')).to.equal(run);
  });

  it('replaces the secret in strings, keys, array items and documents without a prototype, and keeps other values', async function () {
    const id = new ObjectId();
    const bare = Object.assign(Object.create(null) as Document, { note: `was ${SECRET}` });
    const error = await failure(
      withoutEcho(refusing({ ok: 0, nothing: null, code: 18, id, items: ['a', `b ${SECRET}`], [`k-${SECRET}`]: 1, bare, errmsg: `bad ${SECRET}` }), SECRET, '<hidden>')('admin', {}),
    );
    expect(error).to.be.instanceOf(MongoServerError);
    expect(error.message).to.equal('bad <hidden>');
    const response = error.response as Document;
    expect(response.items).to.deep.equal(['a', 'b <hidden>']);
    expect(response).to.have.property('k-<hidden>', 1);
    expect(response.bare.note).to.equal('was <hidden>');
    expect(response.id).to.be.instanceOf(ObjectId);
    expect((response.id as ObjectId).equals(id)).to.equal(true);
    expect(response.nothing).to.equal(null);
    expect(JSON.stringify(response)).to.not.include(SECRET);
  });

  it('finds it in one item of an array alone', async function () {
    const error = await failure(withoutEcho(refusing({ ok: 0, errmsg: 'refused', items: ['a', SECRET] }), SECRET, '<x>')('admin', {}));
    expect(error.response.items).to.deep.equal(['a', '<x>']);
  });

  it('replaces it in the bytes of a Binary, at its start and elsewhere, keeping the subtype', async function () {
    const payload = new Binary(Buffer.from(`${SECRET}\0user\0${SECRET}`), 0);
    const error = await failure(withoutEcho(refusing({ ok: 0, errmsg: 'refused', payload }), SECRET, '<x>')('admin', {}));
    const echoed = error.response.payload as Binary;
    expect(Buffer.from(echoed.buffer).toString()).to.equal('<x>\0user\0<x>');
    expect(echoed.sub_type).to.equal(0);
  });

  it('passes refusals that do not quote it, and errors of other kinds, as they are', async function () {
    const refusal = new MongoServerError({ ok: 0, errmsg: 'Authentication failed.', code: 18 });
    const network = new MongoNetworkError('127.0.0.1:27017', 'closed');
    for (const thrown of [refusal, network]) {
      const run = async (): Promise<Document> => {
        throw thrown;
      };
      expect(await failure(withoutEcho(run, SECRET, '<x>')('admin', {}))).to.equal(thrown);
    }
  });
});
