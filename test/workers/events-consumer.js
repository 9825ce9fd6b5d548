// Auxiliary worker for test/outbox.test.ts: consumes the session events queue and shows what
// it received (GET), as a real consumer would see it.
const received = [];

export default {
  async fetch() {
    return Response.json(received);
  },
  async queue(batch) {
    for (const message of batch.messages) received.push({ body: message.body, attempts: message.attempts });
    batch.ackAll();
  },
};
