// Google's Gemini API, as an upstream format (generateContent, streamGenerateContent).
export { geminiUpstream } from './upstream.js';
