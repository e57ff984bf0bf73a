'use strict'
/*
 * The schema-registry commands of the KafkaJS driver (compat_tests/README.md), through
 * @kafkajs/confluent-schema-registry: its register() (which also reads and, on a subject's first
 * registration, sets the subject's compatibility level), encode() in Confluent's wire format
 * (magic byte 0, the 4-byte id, avsc's Avro binary; --format json: ajv-validated JSON;
 * --format protobuf: protobufjs with the message indexes) and decode() with the writer's schema
 * fetched by id (its type as the registry says).
 *
 *   node driver.js sr-produce --bootstrap H:P --registry URL --topic T --schema-file F --values-file V
 *        [--key-prefix k] [--format avro|json|protobuf]
 *   node driver.js sr-consume --bootstrap H:P --registry URL --topic T --count N [--timeout-ms MS]
 *   node driver.js sr-register --registry URL --subject S --schema-file F [--format avro|json|protobuf]
 */

const crypto = require('crypto')
const fs = require('fs')
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

module.exports = function registryCommands ({ emit, client, properties, errorEvent, withTimeout, Usage, recordingPartitioner }) {
  const EXIT_OK = 0
  const EXIT_ERROR = 1
  const EXIT_TIMEOUT = 2

  const FORMATS = { avro: SchemaType.AVRO, json: SchemaType.JSON, protobuf: SchemaType.PROTOBUF }

  function registry (a) {
    return new SchemaRegistry({ host: a.require('registry'), clientId: 'kbroker-js-driver' })
  }

  /** --schema-file as the library's ConfluentSchema of --format's type. */
  function confluentSchema (a) {
    const format = a.get('format', 'avro')
    if (!(format in FORMATS)) throw new Usage(`unsupported --format ${format} (avro, json or protobuf)`)
    return { type: FORMATS[format], schema: fs.readFileSync(a.require('schema-file'), 'utf8') }
  }

  async function srProduce (a) {
    const topic = a.require('topic')
    const keyPrefix = a.get('key-prefix', 'key-')
    const timeoutMs = a.int('timeout-ms', 30000)
    const values = fs.readFileSync(a.require('values-file'), 'utf8').split('\n')
      .filter(line => line.trim()).map(line => JSON.parse(line))
    const sr = registry(a)
    const subject = `${topic}-value`
    const { id } = await sr.register(confluentSchema(a), { subject })
    emit({ event: 'registered', subject, id })

    // Where each record went: its offset is the partition's base offset plus its place among
    // that partition's records.
    const { placed, createPartitioner } = recordingPartitioner()
    // Protobuf values come in Protobuf's JSON mapping (int64 as strings): fromObject makes the
    // message the library's encode() verifies.
    const schema = await sr.getSchema(id)
    const payload = schema.message ? v => schema.message.fromObject(v) : v => v
    const messages = []
    for (let i = 0; i < values.length; i++) {
      messages.push({ key: Buffer.from(`${keyPrefix}${i}`), value: await sr.encode(id, payload(values[i])) })
    }
    const producer = client(a, properties(a)).producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner })
    let acked = 0
    try {
      await withTimeout(producer.connect(), timeoutMs, 'connecting')
      const results = await withTimeout(producer.send({ topic, messages, acks: -1, timeout: timeoutMs }),
        timeoutMs, `delivering ${values.length} records`)
      const base = new Map(results.map(r => [r.partition, Number(r.baseOffset)]))
      const next = new Map()
      messages.forEach((m, i) => {
        const p = placed.get(m)
        const pos = next.get(p) || 0
        next.set(p, pos + 1)
        emit({ event: 'produced', index: i, topic, partition: p, offset: base.get(p) + pos })
        acked++
      })
    } catch (e) {
      emit(errorEvent(e))
    } finally {
      await producer.disconnect().catch(() => {})
    }
    emit({ event: 'done', produced: acked, requested: values.length })
    return acked === values.length ? EXIT_OK : EXIT_ERROR
  }

  async function srConsume (a) {
    const topic = a.require('topic')
    const count = a.int('count', 10)
    const timeoutMs = a.int('timeout-ms', 30000)
    const sr = registry(a)
    // KafkaJS reads through a group only: a fresh one that commits nothing, from the beginning.
    const consumer = client(a, properties(a)).consumer({
      groupId: `kbroker-js-driver-${crypto.randomUUID()}`, maxWaitTimeInMs: 500
    })
    let seen = 0
    let failure = null
    let finish
    const finished = new Promise(resolve => { finish = resolve })
    const deadline = setTimeout(finish, timeoutMs)
    try {
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (seen >= count || failure) return
          try {
            let value = await sr.decode(message.value)
            // a protobufjs message prints in Protobuf's JSON mapping
            if (value && value.$type) value = value.toJSON()
            emit({
              event: 'record',
              topic,
              partition,
              offset: Number(message.offset),
              key: message.key === null ? null : message.key.toString('utf8'),
              schemaId: message.value.readInt32BE(1),
              value
            })
            if (++seen >= count) finish()
          } catch (e) {
            failure = e
            finish()
          }
        }
      })
      await finished
      if (failure) throw failure
    } catch (e) {
      emit(errorEvent(e))
      return EXIT_ERROR
    } finally {
      clearTimeout(deadline)
      await withTimeout(consumer.disconnect(), 10000, 'leaving the group').catch(() => {})
    }
    const ok = seen >= count
    emit({ event: 'done', consumed: seen, requested: count, timedOut: !ok })
    return ok ? EXIT_OK : EXIT_TIMEOUT
  }

  /** A refusal is an error event with the registry's HTTP status (ResponseError.status). */
  async function srRegister (a) {
    const subject = a.require('subject')
    try {
      const { id } = await registry(a).register(confluentSchema(a), { subject })
      emit({ event: 'registered', subject, id })
      return EXIT_OK
    } catch (e) {
      if (typeof e.status !== 'number') throw e
      emit({ event: 'error', error: 'refused', status: e.status, message: e.message })
      return EXIT_ERROR
    }
  }

  return {
    'sr-produce': [[], srProduce],
    'sr-consume': [[], srConsume],
    'sr-register': [[], srRegister]
  }
}
