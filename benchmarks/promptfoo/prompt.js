// The messages afpbench renders for a fixture (condition A), passed as one JSON string variable: an
// array variable would make promptfoo expand it into one test per element.
module.exports = async function ({ vars }) {
  return vars.messages_json;
};
