// Runs dynalite's own cli.js, but survives a request its client aborted.
// dynalite 4.0.0 answers an aborted request body with
// `req.on('error', function (err) { throw err })` (index.js), which kills
// the whole server; a real DynamoDB endpoint shrugs it off. The tests cancel
// requests on purpose (a cancelled Delete), so that must not take the
// store down with it. Any other uncaught error still ends the process.
process.on('uncaughtException', function (err) {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('dynalite: ignored a request its client aborted')
    return
  }
  console.error(err)
  process.exit(1)
})
require('./node_modules/dynalite/cli.js')
