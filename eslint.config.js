import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/', '.data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      'no-console': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // The CLI entry points talk to a person at a terminal; everything else logs through winston.
    files: ['src/bin/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // The README's client example shows its answers on the terminal.
    files: ['client/example.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // The operator console and the docs page are plain browser scripts (no bundler, no framework).
    files: ['public/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: {
        window: 'readonly',
        document: 'readonly',
        sessionStorage: 'readonly',
        fetch: 'readonly',
        crypto: 'readonly',
        URLSearchParams: 'readonly',
        Node: 'readonly',
        SwaggerUIBundle: 'readonly',
        console: 'readonly',
      },
    },
  },
  {
    // Mocha loads reporters with require(), so this one file is CommonJS and prints by design.
    files: ['test/support/summary-reporter.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', console: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off', 'no-console': 'off' },
  },
)
