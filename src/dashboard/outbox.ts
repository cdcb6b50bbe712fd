// E-mail through an outbox: a message is a row written in the same transaction as what it is about (a
// ticket, an alert, a reset), and a worker sends unsent rows and marks them sent, retrying failures on
// its next pass. SMTP via nodemailer (SMTP_URL); without it (the local run) messages are written to
// the log instead, so nothing is lost and nothing needs a mail server.
import nodemailer from 'nodemailer';
import type { Database, Queryable } from '../record/database.js';

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
}

export function smtpMailer(url: string, from: string): Mailer {
  const transport = nodemailer.createTransport(url);
  return {
    async send(mail) {
      await transport.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text });
    },
  };
}

/** The local run's mailer: each message as one log line. */
export function logMailer(write: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Mailer {
  return {
    async send(mail) {
      write(JSON.stringify({ event: 'email', to: mail.to, subject: mail.subject, text: mail.text }));
    },
  };
}

export async function enqueueEmail(tx: Queryable, mail: Mail): Promise<void> {
  await tx.query('INSERT INTO email_outbox (recipient, subject, body) VALUES ($1, $2, $3)', [mail.to, mail.subject, mail.text]);
}

export interface OutboxWorker {
  /** Sends what is unsent now; how many went out. */
  drain(): Promise<number>;
  stop(): void;
}

/** Messages given up on after this many failed attempts (kept, with the last error, for an operator). */
const MAX_ATTEMPTS = 20;

export function startOutboxWorker(opts: { db: Database; mailer: Mailer; intervalMs: number; onError?: (err: unknown) => void }): OutboxWorker {
  let running: Promise<number> | undefined;
  const pass = async (): Promise<number> => {
    const rows = await opts.db.query<{ id: number; recipient: string; subject: string; body: string }>(
      'SELECT id, recipient, subject, body FROM email_outbox WHERE sent_at IS NULL AND attempts < $1 ORDER BY id LIMIT 100',
      [MAX_ATTEMPTS],
    );
    let sent = 0;
    for (const r of rows.rows) {
      try {
        await opts.mailer.send({ to: r.recipient, subject: r.subject, text: r.body });
        await opts.db.query('UPDATE email_outbox SET sent_at = now(), attempts = attempts + 1 WHERE id = $1', [r.id]);
        sent++;
      } catch (err) {
        await opts.db.query('UPDATE email_outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1', [r.id, String(err).slice(0, 500)]);
        opts.onError?.(err);
      }
    }
    return sent;
  };
  const drain = (): Promise<number> => {
    running ??= pass().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = opts.intervalMs > 0 ? setInterval(() => void drain().catch((err: unknown) => opts.onError?.(err)), opts.intervalMs) : undefined;
  timer?.unref();
  return {
    drain,
    stop: () => {
      if (timer !== undefined) clearInterval(timer);
    },
  };
}
